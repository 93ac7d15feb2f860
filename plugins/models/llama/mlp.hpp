// SwiGLU feed-forward block (Hugging Face LlamaMLP): down(silu(gate(x)) * up(x)).
// gate_proj and up_proj are column-parallel, down_proj row-parallel.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <memory>

#include "llama_config.hpp"
#include "triax/layers/linear.hpp"
#include "triax/model.hpp"

namespace triax::llama {

class LlamaMLP : public torch::nn::Module {
 public:
  LlamaMLP(const LlamaConfig& config, const ModelContext& context);

  // x: [batch, seq, hidden] -> [batch, seq, hidden] ([batch, seq/tp, hidden] in REDUCE_SCATTER mode)
  at::Tensor forward(const at::Tensor& x);

  std::shared_ptr<ColumnParallelLinear> gate_proj, up_proj;
  std::shared_ptr<RowParallelLinear> down_proj;

 private:
  TensorParallel tp_;
};

}  // namespace triax::llama
