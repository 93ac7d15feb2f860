#include "triax/layers/context_parallel_slice.hpp"

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "triax/error.hpp"

namespace triax {

ContextParallelSlice::ContextParallelSlice(int64_t sequence_length, int rank, int size)
    : rank_(rank), size_(size), chunk_(0) {
  if (size < 1 || rank < 0 || rank >= size)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "context parallelism: rank " + std::to_string(rank) + " is not in a cp group of " + std::to_string(size));
  if (sequence_length % (2 * size) != 0)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "parallelism.context_parallel_size (" + std::to_string(size) + ") must split the sequence of " +
                    std::to_string(sequence_length) + " tokens into 2 x " + std::to_string(size) +
                    " equal chunks (tokens.sequence_length must be a multiple of " + std::to_string(2 * size) + ")");
  chunk_ = sequence_length / (2 * size);
}

at::Tensor ContextParallelSlice::of(const at::Tensor& rows) const {
  if (rows.dim() < 2 || rows.size(1) != 2 * size_ * chunk_)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "context parallelism: expected rows [batch, " +
                                                  std::to_string(2 * size_ * chunk_) + ", ...] to slice");
  const int64_t mirrored = 2 * size_ - 1 - rank_;
  return at::cat({rows.narrow(1, rank_ * chunk_, chunk_), rows.narrow(1, mirrored * chunk_, chunk_)}, 1);
}

at::Tensor ContextParallelSlice::indices_of(int rank, c10::Device device) const {
  const auto options = at::TensorOptions().dtype(at::kLong).device(device);
  const int64_t mirrored = 2 * size_ - 1 - rank;
  return at::cat({at::arange(rank * chunk_, (rank + 1) * chunk_, options),
                  at::arange(mirrored * chunk_, (mirrored + 1) * chunk_, options)});
}

at::Tensor ContextParallelSlice::token_indices(c10::Device device) const { return indices_of(rank_, device); }

at::Tensor ContextParallelSlice::gathered_token_indices(c10::Device device) const {
  std::vector<at::Tensor> parts;
  for (int r = 0; r < size_; ++r) parts.push_back(indices_of(r, device));
  return at::cat(parts);
}

}  // namespace triax
