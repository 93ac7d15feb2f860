// Learned absolute position embeddings (GPT-2's wpe): row p of the weight is added to the token
// at position p. CausalLm holds one on the first pipeline stage when its layout names one.
//
// The weight [max_positions, hidden] is replicated over tp. In REDUCE_SCATTER mode a rank adds
// only the rows of its sequence shard, so the weight's gradient is summed over tp in backward
// (replicated_on_sequence_shard): every rank ends up with the whole gradient.
#pragma once

#include <ATen/core/Tensor.h>

#include "triax/layers/tensor_parallel.hpp"
#include "triax/parameter.hpp"

namespace triax {

class PositionEmbedding : public SpecifiedModule {
 public:
  PositionEmbedding(int64_t max_positions, int64_t hidden_size, c10::Device device, c10::ScalarType dtype,
                    const TensorParallel& tp);
  // positions: [rows, seq] int64 over the whole sequence (rows may be 1, broadcast over the
  // batch) -> [rows, seq, hidden], or this rank's sequence shard [rows, seq/tp, hidden] in
  // REDUCE_SCATTER mode. Positions past the table read its last row: they are the padding of a
  // sequence-parallel cached forward, whose outputs are discarded.
  at::Tensor forward(const at::Tensor& positions);
  at::Tensor weight;  // [max_positions, hidden]

 private:
  TensorParallel tp_;
};

}  // namespace triax
