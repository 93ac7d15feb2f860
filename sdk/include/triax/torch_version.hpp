// The LibTorch version this translation unit is compiled against, as "MAJOR.MINOR.PATCH", and
// its C++ ABI flag: what a plugin's manifest declares and what the loader compares. Only
// preprocessor definitions: no LibTorch code is pulled in.
#pragma once

#include <torch/headeronly/version.h>

#define TRIAX_STRINGIFY_IMPL(x) #x
#define TRIAX_STRINGIFY(x) TRIAX_STRINGIFY_IMPL(x)
#define TRIAX_TORCH_VERSION_STRING \
  TRIAX_STRINGIFY(TORCH_VERSION_MAJOR) "." TRIAX_STRINGIFY(TORCH_VERSION_MINOR) "." TRIAX_STRINGIFY(TORCH_VERSION_PATCH)

#ifndef _GLIBCXX_USE_CXX11_ABI
#define TRIAX_CXX11_ABI_FLAG (-1)
#else
#define TRIAX_CXX11_ABI_FLAG _GLIBCXX_USE_CXX11_ABI
#endif
