// The kernel of piece_copies.hpp: one block per chunk, 16 bytes a thread at a time where the
// chunk's source, destination and length allow it (every piece the caching allocator places, but
// a view may start anywhere), byte by byte otherwise.
#include <cstdint>

#include "triax/kernels/piece_copies.hpp"

namespace triax::kernels {
namespace {

constexpr int kThreads = 512;

__global__ void copy_chunks(const DeviceCopyPiece* __restrict__ pieces, int64_t count, int64_t chunk_bytes) {
  const int64_t chunk = blockIdx.x;
  const DeviceCopyPiece piece = pieces[piece_of_chunk(pieces, count, chunk)];
  const int64_t begin = (chunk - piece.first_chunk) * chunk_bytes;
  const int64_t bytes = piece.bytes - begin < chunk_bytes ? piece.bytes - begin : chunk_bytes;
  const char* source = static_cast<const char*>(piece.source) + begin;
  char* destination = static_cast<char*>(piece.destination) + begin;
  const auto alignment = reinterpret_cast<uintptr_t>(source) | reinterpret_cast<uintptr_t>(destination) |
                         static_cast<uintptr_t>(bytes);
  if (alignment % sizeof(int4) == 0) {
    const int4* from = reinterpret_cast<const int4*>(source);
    int4* to = reinterpret_cast<int4*>(destination);
    const int64_t vectors = bytes / static_cast<int64_t>(sizeof(int4));
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < vectors; i += blockDim.x) to[i] = from[i];
    return;
  }
  for (int64_t i = threadIdx.x; i < bytes; i += blockDim.x) destination[i] = source[i];
}

}  // namespace

cudaError_t launch_piece_copies(const DeviceCopyPiece* pieces_on_device, int64_t count, int64_t chunks,
                                int64_t chunk_bytes, cudaStream_t stream) {
  if (count == 0 || chunks == 0) return cudaSuccess;
  copy_chunks<<<static_cast<unsigned int>(chunks), kThreads, 0, stream>>>(pieces_on_device, count, chunk_bytes);
  return cudaGetLastError();
}

}  // namespace triax::kernels
