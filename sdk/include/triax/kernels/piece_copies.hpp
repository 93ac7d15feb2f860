// Many device-to-device copies in one kernel launch. A checkpoint's staging copies are hundreds of
// parameters and optimizer state tensors, many of them small (norms, biases, step counters), and
// as many cudaMemcpyAsync calls would each cost a launch and a gap on the side stream. The pieces
// are cut into chunks of at most kCopyChunkBytes, one block of the kernel per chunk, so that every
// block copies about as much whatever the pieces' sizes.
#pragma once

#include <cstdint>
#include <vector>

#ifdef TRIAX_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace triax::kernels {

struct DeviceCopyPiece {
  const void* source = nullptr;
  void* destination = nullptr;
  int64_t bytes = 0;
  int64_t first_chunk = 0;  // the chunks of the pieces before this one
};

inline constexpr int64_t kCopyChunkBytes = int64_t{1} << 20;

// Drops the empty pieces and numbers the others' chunks (first_chunk); returns the chunks of all.
int64_t number_chunks(std::vector<DeviceCopyPiece>& pieces, int64_t chunk_bytes = kCopyChunkBytes);

#ifdef __CUDACC__
#define TRIAX_HOST_AND_DEVICE __host__ __device__
#else
#define TRIAX_HOST_AND_DEVICE
#endif

// The piece that holds `chunk`, of `count` numbered pieces: the last whose first_chunk is at most
// `chunk`. The kernel's search, run by its tests on the host.
inline TRIAX_HOST_AND_DEVICE int64_t piece_of_chunk(const DeviceCopyPiece* pieces, int64_t count, int64_t chunk) {
  int64_t low = 0, high = count - 1;
  while (low < high) {
    const int64_t middle = (low + high + 1) / 2;
    if (pieces[middle].first_chunk <= chunk)
      low = middle;
    else
      high = middle - 1;
  }
  return low;
}

#ifdef TRIAX_WITH_CUDA
// Queues on `stream` the copy of every piece of `pieces_on_device` (numbered by number_chunks,
// the table itself in device memory), `chunks` blocks in one launch; the launch's error.
cudaError_t launch_piece_copies(const DeviceCopyPiece* pieces_on_device, int64_t count, int64_t chunks,
                                int64_t chunk_bytes, cudaStream_t stream);
#endif

}  // namespace triax::kernels
