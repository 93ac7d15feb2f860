#include "triax/layers/swiglu_mlp.hpp"

#include <ATen/ATen.h>

namespace triax {

SwiGluMlp::SwiGluMlp(int64_t hidden_size, int64_t intermediate_size, const ModelContext& context)
    : recompute_activation_(context.recompute_mlp_activation) {
  const TensorParallel tp = TensorParallel::of(context);
  LinearOptions gate_up = LinearOptions::of(hidden_size, intermediate_size, context);
  gate_up.parts = 2;
  gate_up_proj = register_module("gate_up_proj", std::make_shared<ColumnParallelLinear>(gate_up, tp));
  down_proj = register_module(
      "down_proj", std::make_shared<RowParallelLinear>(LinearOptions::of(intermediate_size, hidden_size, context), tp));
}

HfTensorRule SwiGluMlp::hf_rule(const std::string& prefix, int64_t hidden_size, int64_t intermediate_size) {
  return HfTensorRule::stack(prefix + "gate_up_proj.weight", {2, intermediate_size, hidden_size}, 0,
                             {prefix + "gate_proj.weight", prefix + "up_proj.weight"});
}

at::Tensor SwiGluMlp::gate_up_matrix_at_decode() const {
  if (recompute_activation_ || down_proj->computes_in_fp8()) return {};
  return gate_up_proj->matrix_at_decode();
}

at::Tensor SwiGluMlp::forward(const at::Tensor& x) {
  // A decoding step's few rows: SwiGLU written by the gate/up product's kernel. Not where the down
  // projection would take another path (the recomputed activation's product, fp8's amax).
  if (!recompute_activation_ && !down_proj->computes_in_fp8())
    if (const at::Tensor activated = gate_up_proj->forward_swiglu_at_decode(x); activated.defined())
      return down_proj->forward(activated);
  return down_proj->forward_activated(RecomputedActivation::SwigluHalves, gate_up_proj->forward(x),
                                      recompute_activation_);
}

}  // namespace triax
