# Imports libtorch from the installed `torch` Python wheel as Libtorch::torch.
#
# torch's own TorchConfig.cmake insists on finding a matching CUDA toolkit
# for the cu130 wheel even for CPU-only code; gradd only needs the headers and
# the shared libraries, so it imports them directly. libtorch_cuda is linked
# (without --as-needed) when present so CUDA tensors work in gradd's programs.
#
# LIBTORCH_DIR, when set, names the torch package folder (include/ and lib/)
# to use; otherwise the `torch` module of the Python found says where it is.
# gradd's installed package sets it to the torch gradd was built with.
if(NOT LIBTORCH_DIR)
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  execute_process(
    COMMAND ${Python3_EXECUTABLE} -c "import os, torch; print(os.path.dirname(torch.__file__), end='')"
    OUTPUT_VARIABLE LIBTORCH_DIR RESULT_VARIABLE _libtorch_rc ERROR_QUIET)
  if(NOT _libtorch_rc EQUAL 0)
    set(LIBTORCH_DIR "")
  endif()
endif()
find_library(LIBTORCH_CPU_LIBRARY torch_cpu HINTS ${LIBTORCH_DIR}/lib NO_DEFAULT_PATH)
find_library(LIBTORCH_LIBRARY torch HINTS ${LIBTORCH_DIR}/lib NO_DEFAULT_PATH)
find_library(LIBTORCH_C10_LIBRARY c10 HINTS ${LIBTORCH_DIR}/lib NO_DEFAULT_PATH)
find_library(LIBTORCH_CUDA_LIBRARY torch_cuda HINTS ${LIBTORCH_DIR}/lib NO_DEFAULT_PATH)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Libtorch
  REQUIRED_VARS LIBTORCH_DIR LIBTORCH_CPU_LIBRARY LIBTORCH_LIBRARY LIBTORCH_C10_LIBRARY)
if(Libtorch_FOUND AND NOT TARGET Libtorch::torch)
  add_library(Libtorch::torch INTERFACE IMPORTED)
  set(_libs ${LIBTORCH_LIBRARY} ${LIBTORCH_CPU_LIBRARY} ${LIBTORCH_C10_LIBRARY})
  if(LIBTORCH_CUDA_LIBRARY)
    set(_libs "-Wl,--no-as-needed" ${LIBTORCH_CUDA_LIBRARY} "-Wl,--as-needed" ${_libs})
  endif()
  set_target_properties(Libtorch::torch PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES
      "${LIBTORCH_DIR}/include;${LIBTORCH_DIR}/include/torch/csrc/api/include"
    INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=1"
    INTERFACE_LINK_LIBRARIES "${_libs}"
    INTERFACE_LINK_OPTIONS "-Wl,-rpath,${LIBTORCH_DIR}/lib")
  # The CPU part alone, for programs that need libtorch's c10d store but no
  # device code (gradd daemon).
  add_library(Libtorch::cpu INTERFACE IMPORTED)
  set_target_properties(Libtorch::cpu PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES
      "${LIBTORCH_DIR}/include;${LIBTORCH_DIR}/include/torch/csrc/api/include"
    INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=1"
    INTERFACE_LINK_LIBRARIES "${LIBTORCH_CPU_LIBRARY};${LIBTORCH_C10_LIBRARY}"
    INTERFACE_LINK_OPTIONS "-Wl,-rpath,${LIBTORCH_DIR}/lib")
endif()
