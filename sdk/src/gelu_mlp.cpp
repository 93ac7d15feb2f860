#include "triax/layers/gelu_mlp.hpp"

#include <ATen/ATen.h>

namespace triax {

GeluMlp::GeluMlp(int64_t hidden_size, int64_t intermediate_size, const ModelContext& context)
    : recompute_activation_(context.recompute_mlp_activation) {
  const TensorParallel tp = TensorParallel::of(context);
  auto linear = [&](int64_t in, int64_t out) { return LinearOptions::of(in, out, context, /*bias=*/true).conv1d(); };
  c_fc = register_module("c_fc", std::make_shared<ColumnParallelLinear>(linear(hidden_size, intermediate_size), tp));
  c_proj = register_module("c_proj", std::make_shared<RowParallelLinear>(linear(intermediate_size, hidden_size), tp));
}

at::Tensor GeluMlp::forward(const at::Tensor& x) {
  return c_proj->forward_activated(RecomputedActivation::GeluTanh, c_fc->forward(x), recompute_activation_);
}

}  // namespace triax
