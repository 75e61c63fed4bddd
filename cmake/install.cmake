# `cmake --install`: libgradd.so, its public headers and the CMake package
# that `find_package(gradd)` reads, giving the imported target gradd::gradd.
#
#   <prefix>/lib/libgradd.so
#   <prefix>/include/gradd/gradd.hpp, interpreter.hpp, policy.hpp, settings.hpp, statistics.hpp
#   <prefix>/lib/cmake/gradd/gradd-config.cmake, gradd-config-version.cmake,
#                            gradd-targets*.cmake, FindLibtorch.cmake
#
# A consumer links gradd::gradd and nothing else. The static gradd_compiler
# and gradd_config are inside libgradd.so (CMakeLists.txt links them as
# BUILD_INTERFACE, so the package does not name them); libtorch comes with
# the target (the package finds Libtorch::torch again with this FindLibtorch);
# CAF, TBB and yaml-cpp are private to libgradd.so, whose RUNPATH finds them.

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(GRADD_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/gradd)

# include/gradd/ is installed as it is, so a program includes
# "gradd/gradd.hpp" in this tree and out of it. C++17 is libtorch's minimum
# and enough for gradd's headers.
target_include_directories(gradd INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(gradd INTERFACE cxx_std_17)
# The installed library keeps the RUNPATH entries of what it links outside
# the system folders: the torch wheel's lib/, and .deps/ on the GPU machine.
set_target_properties(gradd PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)

install(TARGETS gradd EXPORT gradd-targets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/gradd DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT gradd-targets NAMESPACE gradd:: DESTINATION ${GRADD_INSTALL_CMAKEDIR})

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/gradd-config.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/gradd-config.cmake
  INSTALL_DESTINATION ${GRADD_INSTALL_CMAKEDIR})
# 0.x: a minor version may break the API, so only the same minor matches.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/gradd-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${CMAKE_CURRENT_BINARY_DIR}/gradd-config.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/gradd-config-version.cmake
  ${CMAKE_CURRENT_LIST_DIR}/FindLibtorch.cmake
  DESTINATION ${GRADD_INSTALL_CMAKEDIR})
