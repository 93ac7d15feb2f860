#include "triax/interop/checksum.hpp"

#include <zlib.h>

#include <algorithm>

namespace triax::interop {

uint32_t crc32_of(const at::Tensor& tensor) {
  const auto* bytes = static_cast<const unsigned char*>(tensor.data_ptr());
  size_t left = tensor.nbytes();
  uLong crc = crc32(0L, Z_NULL, 0);
  while (left > 0) {  // zlib takes 32-bit lengths
    const auto chunk = static_cast<uInt>(std::min<size_t>(left, 1u << 30));
    crc = crc32(crc, bytes, chunk);
    bytes += chunk;
    left -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

}  // namespace triax::interop
