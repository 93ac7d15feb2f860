#include "triax/layers/squared_relu_mlp.hpp"

#include <ATen/ATen.h>

namespace triax {

SquaredReluMlp::SquaredReluMlp(int64_t hidden_size, int64_t intermediate_size, const ModelContext& context) {
  const TensorParallel tp = TensorParallel::of(context);
  up_proj = register_module(
      "up_proj", std::make_shared<ColumnParallelLinear>(LinearOptions::of(hidden_size, intermediate_size, context), tp));
  down_proj = register_module(
      "down_proj", std::make_shared<RowParallelLinear>(LinearOptions::of(intermediate_size, hidden_size, context), tp));
}

at::Tensor SquaredReluMlp::forward(const at::Tensor& x) {
  return down_proj->forward(at::square(at::relu(up_proj->forward(x))));
}

}  // namespace triax
