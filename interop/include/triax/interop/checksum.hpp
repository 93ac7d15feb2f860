// CRC-32 (zlib's) of a tensor's bytes: stored with every dataset of a checkpoint and verified on
// every read, so a flipped or truncated byte names the tensor instead of training on it.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace triax::interop {

uint32_t crc32_of(const at::Tensor& contiguous_cpu_tensor);

}  // namespace triax::interop
