# Locates LibTorch and defines the interface target triax::torch.
#
# The LibTorch of the torch Python wheel is found through CMAKE_PREFIX_PATH
# (`python -c 'import torch; print(torch.utils.cmake_prefix_path)'`); a user-given Torch_DIR wins.
#
# CPU builds link libtorch_cpu and libc10; GPU builds (TRIAX_CUDA=ON) add libtorch_cuda,
# libc10_cuda and the CUDA toolkit's headers.
if(TARGET triax::torch)
  return()
endif()

# Candidate folders: Torch_DIR, then every CMAKE_PREFIX_PATH entry (the variable, then the
# environment variable, whose entries may be separated by ':' or ';').
set(_triax_torch_candidates "${Torch_DIR}")
set(_triax_env_prefixes "$ENV{CMAKE_PREFIX_PATH}")
string(REPLACE ":" ";" _triax_env_prefixes "${_triax_env_prefixes}")
foreach(_prefix IN LISTS CMAKE_PREFIX_PATH _triax_env_prefixes)
  if(_prefix)
    list(APPEND _triax_torch_candidates "${_prefix}" "${_prefix}/Torch" "${_prefix}/share/cmake/Torch")
  endif()
endforeach()
if(NOT TRIAX_TORCH_CMAKE_DIR)
  foreach(_dir IN LISTS _triax_torch_candidates)
    if(_dir AND EXISTS "${_dir}/TorchConfig.cmake")
      set(TRIAX_TORCH_CMAKE_DIR "${_dir}" CACHE PATH "Folder holding LibTorch's TorchConfig.cmake" FORCE)
      break()
    endif()
  endforeach()
endif()
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

# The libraries are imported one by one rather than through TorchConfig.cmake: the wheel's
# TorchConfig insists on a CUDA toolkit even for CPU use, and its `torch` target links
# libtorch.so, a thin library that re-exports std::filesystem functions which crash when they
# interpose on the C++ library's own (seen with remove_all in a CUDA build).
function(_triax_torch_library variable name)
  find_library(${variable} ${name} PATHS "${TRIAX_TORCH_ROOT}/lib" NO_DEFAULT_PATH REQUIRED)
endfunction()
_triax_torch_library(TRIAX_TORCH_CPU_LIBRARY torch_cpu)
_triax_torch_library(TRIAX_C10_LIBRARY c10)
target_link_libraries(triax_torch INTERFACE "${TRIAX_TORCH_CPU_LIBRARY}" "${TRIAX_C10_LIBRARY}")
target_include_directories(triax_torch SYSTEM INTERFACE
  "${TRIAX_TORCH_ROOT}/include"
  "${TRIAX_TORCH_ROOT}/include/torch/csrc/api/include")
# The wheels are built with the C++11 ABI; say so explicitly so a mismatch cannot hide.
target_compile_definitions(triax_torch INTERFACE _GLIBCXX_USE_CXX11_ABI=1)
if(TRIAX_CUDA)
  find_package(CUDAToolkit REQUIRED)  # headers only: LibTorch brings its own CUDA runtime
  _triax_torch_library(TRIAX_TORCH_CUDA_LIBRARY torch_cuda)
  _triax_torch_library(TRIAX_C10_CUDA_LIBRARY c10_cuda)
  # libtorch_cuda registers the CUDA kernels when loaded: keep it even if no symbol is used.
  target_link_libraries(triax_torch INTERFACE
    "-Wl,--push-state,--no-as-needed,${TRIAX_TORCH_CUDA_LIBRARY},--pop-state" "${TRIAX_C10_CUDA_LIBRARY}")
  target_include_directories(triax_torch SYSTEM INTERFACE ${CUDAToolkit_INCLUDE_DIRS})
  target_compile_definitions(triax_torch INTERFACE TRIAX_WITH_CUDA=1)
endif()
# LibTorch ships fmt 12 in its include folder; use it header-only (Debian's fmt 9 belongs to spdlog).
target_compile_definitions(triax_torch INTERFACE FMT_HEADER_ONLY=1)
