# Locates LibTorch and defines the interface target triax::torch.
#
# The LibTorch of the torch Python wheel is found through CMAKE_PREFIX_PATH
# (`python -c 'import torch; print(torch.utils.cmake_prefix_path)'`); a user-given Torch_DIR wins.
#
# CPU builds (TRIAX_CUDA=OFF) import libtorch_cpu and libc10 directly: the wheel's own
# TorchConfig.cmake insists on a CUDA toolkit when the wheel is a CUDA build, which a CPU
# machine need not have. GPU builds (TRIAX_CUDA=ON) go through find_package(Torch).
if(TARGET triax::torch)
  return()
endif()

find_path(TRIAX_TORCH_CMAKE_DIR TorchConfig.cmake
  HINTS "${Torch_DIR}"
  PATH_SUFFIXES Torch share/cmake/Torch
  DOC "Folder holding LibTorch's TorchConfig.cmake")
if(NOT TRIAX_TORCH_CMAKE_DIR)
  message(FATAL_ERROR
    "LibTorch not found. Set Torch_DIR to the folder holding TorchConfig.cmake, or add "
    "`python -c 'import torch; print(torch.utils.cmake_prefix_path)'` to CMAKE_PREFIX_PATH "
    "(tools/setup.sh does this).")
endif()
include("${TRIAX_TORCH_CMAKE_DIR}/TorchConfigVersion.cmake")
set(TRIAX_TORCH_VERSION "${PACKAGE_VERSION}")
get_filename_component(TRIAX_TORCH_ROOT "${TRIAX_TORCH_CMAKE_DIR}/../../.." ABSOLUTE)
message(STATUS "LibTorch ${TRIAX_TORCH_VERSION} at ${TRIAX_TORCH_ROOT}")

add_library(triax_torch INTERFACE)
add_library(triax::torch ALIAS triax_torch)
# The installed SDK names its LibTorch dependency TriaxTorch::torch (defined by the package
# config, from the consumer's own LibTorch), a name that does not exist in the triax build.
if(TRIAX_TORCH_FOR_PACKAGE)
  add_library(TriaxTorch::torch ALIAS triax_torch)
endif()

if(TRIAX_CUDA)
  set(Torch_DIR "${TRIAX_TORCH_CMAKE_DIR}")
  find_package(Torch REQUIRED)
  target_link_libraries(triax_torch INTERFACE ${TORCH_LIBRARIES})
  target_compile_definitions(triax_torch INTERFACE TRIAX_WITH_CUDA=1)
else()
  find_library(TRIAX_TORCH_CPU_LIBRARY torch_cpu PATHS "${TRIAX_TORCH_ROOT}/lib" NO_DEFAULT_PATH REQUIRED)
  find_library(TRIAX_C10_LIBRARY c10 PATHS "${TRIAX_TORCH_ROOT}/lib" NO_DEFAULT_PATH REQUIRED)
  target_link_libraries(triax_torch INTERFACE "${TRIAX_TORCH_CPU_LIBRARY}" "${TRIAX_C10_LIBRARY}")
  target_include_directories(triax_torch SYSTEM INTERFACE
    "${TRIAX_TORCH_ROOT}/include"
    "${TRIAX_TORCH_ROOT}/include/torch/csrc/api/include")
  # The wheels are built with the C++11 ABI; say so explicitly so a mismatch cannot hide.
  target_compile_definitions(triax_torch INTERFACE _GLIBCXX_USE_CXX11_ABI=1)
endif()
# LibTorch ships fmt 12 in its include folder; use it header-only (Debian's fmt 9 belongs to spdlog).
target_compile_definitions(triax_torch INTERFACE FMT_HEADER_ONLY=1)
