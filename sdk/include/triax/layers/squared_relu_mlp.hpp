// The non-gated feed-forward block with a squared ReLU (Hugging Face NemotronHMLP with
// mlp_hidden_act "relu2", no biases): down(relu(up(x))^2). up is column-parallel, down
// row-parallel, weights [out, in] (nn.Linear's layout), so Hugging Face's up_proj.weight and
// down_proj.weight map by name. The activation's output is kept for backward:
// ModelContext::recompute_mlp_activation does not apply to this block.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <memory>

#include "triax/layers/linear.hpp"
#include "triax/model.hpp"

namespace triax {

class SquaredReluMlp : public torch::nn::Module {
 public:
  SquaredReluMlp(int64_t hidden_size, int64_t intermediate_size, const ModelContext& context);

  // x: [batch, seq, hidden] -> [batch, seq, hidden] ([batch, seq/tp, hidden] in REDUCE_SCATTER mode)
  at::Tensor forward(const at::Tensor& x);

  std::shared_ptr<ColumnParallelLinear> up_proj;  // [intermediate, hidden]
  std::shared_ptr<RowParallelLinear> down_proj;   // [hidden, intermediate]
};

}  // namespace triax
