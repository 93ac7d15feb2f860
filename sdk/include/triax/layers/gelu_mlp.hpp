// GPT-2's feed-forward block (Hugging Face GPT2MLP): c_proj(gelu(c_fc(x))) with the tanh
// approximation of GELU (GPT-2's "gelu_new"), biases on both, weights in Conv1D layout
// (triax/layers/linear.hpp). c_fc is column-parallel, c_proj row-parallel. With
// ModelContext::recompute_mlp_activation the GELU output is not kept for backward but recomputed.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <memory>

#include "triax/layers/linear.hpp"
#include "triax/model.hpp"

namespace triax {

class GeluMlp : public torch::nn::Module {
 public:
  GeluMlp(int64_t hidden_size, int64_t intermediate_size, const ModelContext& context);

  // x: [batch, seq, hidden] -> [batch, seq, hidden] ([batch, seq/tp, hidden] in REDUCE_SCATTER mode)
  at::Tensor forward(const at::Tensor& x);

  std::shared_ptr<ColumnParallelLinear> c_fc;   // [hidden, intermediate]
  std::shared_ptr<RowParallelLinear> c_proj;    // [intermediate, hidden]

 private:
  bool recompute_activation_;  // ModelContext::recompute_mlp_activation
};

}  // namespace triax
