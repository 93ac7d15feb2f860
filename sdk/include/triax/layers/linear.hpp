// Linear layers split over the tensor-parallel group, Megatron style:
//  - ColumnParallelLinear splits the output features: weight [out/tp, in].
//  - RowParallelLinear splits the input features: weight [out, in/tp]; partial outputs are
//    summed over the group (ALL_REDUCE) or reduce-scattered along the sequence (REDUCE_SCATTER).
// Weights are created empty on the model's device and dtype; the model initialises them
// (triax/init.hpp) so that every topology starts from the same global values.
#pragma once

#include <ATen/core/Tensor.h>

#include "triax/layers/tensor_parallel.hpp"
#include "triax/parameter.hpp"

namespace triax {

struct LinearOptions {
  int64_t in_features = 0;
  int64_t out_features = 0;
  bool bias = false;
  c10::Device device = c10::Device(c10::kCPU);
  c10::ScalarType dtype = c10::kFloat;

  // A layer of the model being built: on its device, in its dtype.
  static LinearOptions of(int64_t in_features, int64_t out_features, const ModelContext& context, bool bias = false) {
    return {in_features, out_features, bias, context.device, context.dtype};
  }
};

class ColumnParallelLinear : public SpecifiedModule {
 public:
  ColumnParallelLinear(const LinearOptions& options, const TensorParallel& tp);
  // x: [..., in] (replicated over tp) -> [..., out/tp] (this rank's features).
  at::Tensor forward(const at::Tensor& x);
  at::Tensor weight, bias;

 private:
  TensorParallel tp_;
};

class RowParallelLinear : public SpecifiedModule {
 public:
  RowParallelLinear(const LinearOptions& options, const TensorParallel& tp);
  // x: [..., in/tp] (this rank's features) -> [..., out] summed over tp.
  at::Tensor forward(const at::Tensor& x);
  at::Tensor weight, bias;

 private:
  TensorParallel tp_;
};

}  // namespace triax
