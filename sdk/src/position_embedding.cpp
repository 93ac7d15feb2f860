#include "triax/layers/position_embedding.hpp"

#include <ATen/ATen.h>

#include "triax/layers/tensor_parallel_ops.hpp"

namespace triax {

PositionEmbedding::PositionEmbedding(int64_t max_positions, int64_t hidden_size, c10::Device device,
                                     c10::ScalarType dtype, const TensorParallel& tp)
    : tp_(tp) {
  at::Tensor table = at::empty({max_positions, hidden_size}, at::TensorOptions().device(device).dtype(dtype));
  weight = register_parameter_with_spec("weight", table, ParameterSpec::replicated(table));
}

at::Tensor PositionEmbedding::forward(const at::Tensor& positions) {
  at::Tensor ids = positions.clamp_max(weight.size(0) - 1);
  if (tp_.mode == TpMode::ReduceScatter && tp_.size > 1) {
    const int64_t shard = tp_.shard_size(ids.size(1), "sequence length");
    ids = ids.narrow(1, tp_.rank * shard, shard);
  }
  return at::embedding(replicated_on_sequence_shard(weight, tp_), ids);
}

}  // namespace triax
