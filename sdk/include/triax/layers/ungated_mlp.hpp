// A feed-forward block without a gate: output(activation(input(x))), input column-parallel and
// output row-parallel (as SwiGluMlp's gate_up_proj and down_proj). The options pick the
// activation, the biases, the weights' layout and the two projections' names:
//   gpt2(): GPT-2's GPT2MLP, c_proj(gelu(c_fc(x))) with the tanh approximation ("gelu_new"),
//           biases on both, weights in Conv1D layout (triax/layers/linear.hpp);
//   relu_squared(bias): Nemotron-H's MLP, down_proj(relu(up_proj(x))^2) (Hugging Face's "relu2").
// With ModelContext::recompute_mlp_activation the activation's output is not kept for backward
// but recomputed.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <memory>
#include <string>

#include "triax/layers/linear.hpp"
#include "triax/layers/recomputed_activation.hpp"
#include "triax/model.hpp"

namespace triax {

struct UngatedMlpOptions {
  RecomputedActivation activation = RecomputedActivation::GeluTanh;
  bool bias = true;
  bool conv1d_layout = false;  // weights stored [in, out] (GPT-2's Conv1D) instead of [out, in]
  std::string input_name = "c_fc", output_name = "c_proj";

  static UngatedMlpOptions gpt2() { return {RecomputedActivation::GeluTanh, true, true, "c_fc", "c_proj"}; }
  static UngatedMlpOptions relu_squared(bool bias) {
    return {RecomputedActivation::ReluSquared, bias, false, "up_proj", "down_proj"};
  }
};

class UngatedMlp : public torch::nn::Module {
 public:
  UngatedMlp(int64_t hidden_size, int64_t intermediate_size, const UngatedMlpOptions& options,
             const ModelContext& context);

  // x: [batch, seq, hidden] -> [batch, seq, hidden] ([batch, seq/tp, hidden] in REDUCE_SCATTER mode)
  at::Tensor forward(const at::Tensor& x);

  std::shared_ptr<ColumnParallelLinear> input_projection;  // hidden -> intermediate
  std::shared_ptr<RowParallelLinear> output_projection;    // intermediate -> hidden

 private:
  RecomputedActivation activation_;
  bool recompute_activation_;  // ModelContext::recompute_mlp_activation
};

}  // namespace triax
