# gradd shares std::string, exceptions and locales with libtorch, which uses
# the shared libstdc++. A toolchain that finds only libstdc++.a (one GPU
# machine image's /opt/gcc wrapper) would put a second copy into libgradd and the
# Python module: a Python process then crashed formatting a number in an
# actor (docs/design.md, "One C++ runtime"). Such a toolchain is told to
# link the system's libstdc++.so.6 by name, before its archive is reached.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.so
                  OUTPUT_VARIABLE GRADD_SHARED_LIBSTDCXX OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT IS_ABSOLUTE "${GRADD_SHARED_LIBSTDCXX}")
    message(STATUS "gradd: ${CMAKE_CXX_COMPILER} finds no libstdc++.so; linking libstdc++.so.6")
    string(APPEND CMAKE_CXX_STANDARD_LIBRARIES " -l:libstdc++.so.6")
  endif()
endif()
