// Which tokens of a sequence each context-parallel rank holds. The sequence is cut into 2 x cp
// equal chunks, and rank r holds chunk r followed by chunk 2 x cp - 1 - r. Under a causal mask a
// query's work grows with its position, so pairing an early chunk with a late one gives every
// rank the same share of attention (Megatron's and torchtitan's load balancing).
//
// The host slices each micro-batch this way (input ids, labels, label mask, positions); attention
// layers rebuild from it where every gathered key sits in the sequence.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace triax {

class ContextParallelSlice {
 public:
  // Throws when sequence_length does not split into 2 x size equal chunks.
  ContextParallelSlice(int64_t sequence_length, int rank, int size);

  int64_t chunk_length() const { return chunk_; }
  int64_t local_length() const { return 2 * chunk_; }
  // This rank's tokens of `rows` ([batch, sequence_length, ...]): [batch, local_length, ...].
  at::Tensor of(const at::Tensor& rows) const;
  // Where this rank's tokens sit in the sequence: [local_length] int64 on `device`.
  at::Tensor token_indices(c10::Device device) const;
  // Where every rank's tokens sit, in rank order, as an all-gather over the cp group joins them:
  // [sequence_length] int64 on `device`.
  at::Tensor gathered_token_indices(c10::Device device) const;

 private:
  at::Tensor indices_of(int rank, c10::Device device) const;

  int rank_, size_;
  int64_t chunk_;
};

}  // namespace triax
