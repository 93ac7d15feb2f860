#include "triax/kernels/piece_copies.hpp"

#include <algorithm>

namespace triax::kernels {

int64_t number_chunks(std::vector<DeviceCopyPiece>& pieces, int64_t chunk_bytes) {
  pieces.erase(std::remove_if(pieces.begin(), pieces.end(), [](const DeviceCopyPiece& p) { return p.bytes <= 0; }),
               pieces.end());
  int64_t chunks = 0;
  for (DeviceCopyPiece& piece : pieces) {
    piece.first_chunk = chunks;
    chunks += (piece.bytes + chunk_bytes - 1) / chunk_bytes;
  }
  return chunks;
}

}  // namespace triax::kernels
