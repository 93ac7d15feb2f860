#include "mlp.hpp"

#include <ATen/ATen.h>

#include "triax/layers/fused_ops.hpp"

namespace triax::llama {

LlamaMLP::LlamaMLP(const LlamaConfig& config, const ModelContext& context) : tp_(TensorParallel::of(context)) {
  const TensorParallel& tp = tp_;
  const int64_t h = config.hidden_size;
  const int64_t ffn = config.intermediate_size;
  gate_proj =
      register_module("gate_proj", std::make_shared<ColumnParallelLinear>(LinearOptions::of(h, ffn, context), tp));
  up_proj = register_module("up_proj", std::make_shared<ColumnParallelLinear>(LinearOptions::of(h, ffn, context), tp));
  down_proj = register_module("down_proj", std::make_shared<RowParallelLinear>(LinearOptions::of(ffn, h, context), tp));
}

at::Tensor LlamaMLP::forward(const at::Tensor& x) {
  const at::Tensor input = gather_column_parallel_input(x, tp_);  // once for gate and up
  return down_proj->forward(swiglu(gate_proj->forward_gathered(input), up_proj->forward_gathered(input)));
}

}  // namespace triax::llama
