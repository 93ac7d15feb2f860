// SwiGLU feed-forward block (Hugging Face LlamaMLP, also Mistral's and Qwen2's):
// down(silu(gate(x)) * up(x)). gate_proj and up_proj are column-parallel, down_proj row-parallel.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <memory>

#include "triax/layers/linear.hpp"
#include "triax/model.hpp"

namespace triax {

class SwiGluMlp : public torch::nn::Module {
 public:
  SwiGluMlp(int64_t hidden_size, int64_t intermediate_size, const ModelContext& context);

  // x: [batch, seq, hidden] -> [batch, seq, hidden] ([batch, seq/tp, hidden] in REDUCE_SCATTER mode)
  at::Tensor forward(const at::Tensor& x);

  std::shared_ptr<ColumnParallelLinear> gate_proj, up_proj;
  std::shared_ptr<RowParallelLinear> down_proj;

 private:
  TensorParallel tp_;
};

}  // namespace triax
