#include "triax/layers/ungated_mlp.hpp"

#include <ATen/ATen.h>

namespace triax {

UngatedMlp::UngatedMlp(int64_t hidden_size, int64_t intermediate_size, const UngatedMlpOptions& options,
                       const ModelContext& context)
    : activation_(options.activation), recompute_activation_(context.recompute_mlp_activation) {
  const TensorParallel tp = TensorParallel::of(context);
  auto linear = [&](int64_t in, int64_t out) {
    LinearOptions linear_options = LinearOptions::of(in, out, context, options.bias);
    return options.conv1d_layout ? linear_options.conv1d() : linear_options;
  };
  input_projection = register_module(
      options.input_name, std::make_shared<ColumnParallelLinear>(linear(hidden_size, intermediate_size), tp));
  output_projection = register_module(options.output_name,
                                      std::make_shared<RowParallelLinear>(linear(intermediate_size, hidden_size), tp));
}

at::Tensor UngatedMlp::forward(const at::Tensor& x) {
  return output_projection->forward_activated(activation_, input_projection->forward(x), recompute_activation_);
}

}  // namespace triax
