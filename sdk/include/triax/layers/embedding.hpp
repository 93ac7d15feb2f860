// Token embedding whose vocabulary rows are split over the tensor-parallel group. The vocabulary
// is padded to a multiple of tp (and of make_vocab_size_divisible_by) by the model.
//
// Each rank looks up the ids of its rows and writes zeros for the others; the partial
// embeddings are then summed over tp: all-reduced (ALL_REDUCE) or reduce-scattered along the
// sequence (REDUCE_SCATTER), which gives the sequence-sharded activations of that mode.
#pragma once

#include <ATen/core/Tensor.h>

#include "triax/layers/tensor_parallel.hpp"
#include "triax/parameter.hpp"

namespace triax {

class VocabParallelEmbedding : public SpecifiedModule {
 public:
  VocabParallelEmbedding(int64_t padded_vocab_size, int64_t hidden_size, c10::Device device, c10::ScalarType dtype,
                         const TensorParallel& tp);
  // ids: [batch, seq] int64, the same on every tp rank -> [batch, seq, hidden] (ALL_REDUCE) or
  // this rank's sequence shard [batch, seq/tp, hidden] (REDUCE_SCATTER).
  at::Tensor forward(const at::Tensor& ids);
  at::Tensor weight;  // [vocab/tp, hidden]
  int64_t vocab_start() const { return vocab_start_; }

 private:
  TensorParallel tp_;
  int64_t vocab_start_ = 0;
};

}  // namespace triax
