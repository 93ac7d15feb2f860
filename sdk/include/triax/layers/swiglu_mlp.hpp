// SwiGLU feed-forward block (Hugging Face LlamaMLP, also Mistral's and Qwen2's):
// down(silu(gate(x)) * up(x)). gate and up are one column-parallel projection, gate_up_proj, with
// the parts dimension of a fused projection: weight [2, intermediate, hidden], gate then up, each
// tp rank holding its slice of the intermediate features of both. One GEMM gives [..., 2 x
// intermediate/tp], gate then up, which swiglu_halves reads in place. down_proj is row-parallel.
// Hugging Face keeps gate_proj.weight and up_proj.weight apart: a STACK rule along dim 0. With
// ModelContext::recompute_mlp_activation the SwiGLU output is not kept for backward but recomputed.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <memory>
#include <string>

#include "triax/hf_mapping.hpp"
#include "triax/layers/linear.hpp"
#include "triax/model.hpp"

namespace triax {

class SwiGluMlp : public torch::nn::Module {
 public:
  SwiGluMlp(int64_t hidden_size, int64_t intermediate_size, const ModelContext& context);

  // x: [batch, seq, hidden] -> [batch, seq, hidden] ([batch, seq/tp, hidden] in REDUCE_SCATTER mode)
  at::Tensor forward(const at::Tensor& x);
  // gate_up_proj's matrix where forward's decoding path would hand the product to a kernel
  // (ColumnParallelLinear::matrix_at_decode) and the down projection takes SwiGLU's output as it
  // is: a decoder layer's norm may then fold into that product (decode_norm_gemv), followed by
  // down_proj->forward. Undefined elsewhere.
  at::Tensor gate_up_matrix_at_decode() const;

  // The tensor rule between prefix + "gate_up_proj.weight" and Hugging Face's prefix +
  // "gate_proj.weight" and prefix + "up_proj.weight".
  static HfTensorRule hf_rule(const std::string& prefix, int64_t hidden_size, int64_t intermediate_size);

  std::shared_ptr<ColumnParallelLinear> gate_up_proj;  // weight [2, intermediate, hidden]: gate, up
  std::shared_ptr<RowParallelLinear> down_proj;

 private:
  bool recompute_activation_;  // ModelContext::recompute_mlp_activation
};

}  // namespace triax
