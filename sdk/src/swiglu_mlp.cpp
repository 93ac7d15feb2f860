#include "triax/layers/swiglu_mlp.hpp"

#include <ATen/ATen.h>

#include "triax/layers/fused_ops.hpp"

namespace triax {

SwiGluMlp::SwiGluMlp(int64_t hidden_size, int64_t intermediate_size, const ModelContext& context)
    : tp_(TensorParallel::of(context)) {
  auto linear = [&](int64_t in, int64_t out) { return LinearOptions::of(in, out, context); };
  gate_proj = register_module("gate_proj",
                              std::make_shared<ColumnParallelLinear>(linear(hidden_size, intermediate_size), tp_));
  up_proj =
      register_module("up_proj", std::make_shared<ColumnParallelLinear>(linear(hidden_size, intermediate_size), tp_));
  down_proj =
      register_module("down_proj", std::make_shared<RowParallelLinear>(linear(intermediate_size, hidden_size), tp_));
}

at::Tensor SwiGluMlp::forward(const at::Tensor& x) {
  const at::Tensor input = gather_column_parallel_input(x, tp_);  // once for gate and up
  return down_proj->forward(swiglu(gate_proj->forward_gathered(input), up_proj->forward_gathered(input)));
}

}  // namespace triax
