# Finds CAF 0.17 (core + io). Debian's libcaf-dev ships no CMake config.
# Set CAF_ROOT to a folder holding the unpacked .debs (see scripts/gpu_deps.sh).
find_path(CAF_INCLUDE_DIR caf/all.hpp HINTS ${CAF_ROOT}/usr/include)
find_library(CAF_CORE_LIBRARY NAMES caf_core HINTS ${CAF_ROOT}/usr/lib/x86_64-linux-gnu)
find_library(CAF_IO_LIBRARY NAMES caf_io HINTS ${CAF_ROOT}/usr/lib/x86_64-linux-gnu)
if(CAF_INCLUDE_DIR)
  file(STRINGS "${CAF_INCLUDE_DIR}/caf/config.hpp" _caf_version_line
       REGEX "^#define CAF_VERSION [0-9]+")
  string(REGEX REPLACE ".* ([0-9]+)$" "\\1" CAF_VERSION "${_caf_version_line}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CAF
  REQUIRED_VARS CAF_INCLUDE_DIR CAF_CORE_LIBRARY CAF_IO_LIBRARY
  VERSION_VAR CAF_VERSION)
if(CAF_FOUND AND NOT TARGET CAF::core)
  find_package(Threads REQUIRED)
  add_library(CAF::core SHARED IMPORTED)
  set_target_properties(CAF::core PROPERTIES
    IMPORTED_LOCATION "${CAF_CORE_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES Threads::Threads)
  add_library(CAF::io SHARED IMPORTED)
  set_target_properties(CAF::io PROPERTIES
    IMPORTED_LOCATION "${CAF_IO_LIBRARY}"
    INTERFACE_LINK_LIBRARIES CAF::core)
endif()
