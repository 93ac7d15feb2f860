// y = x W^T with both operands cast to fp8 and scaled on the fly (docs/fp8.md), as a custom
// autograd function: forward and the two backward products (grad_input = grad_y W, grad_weight =
// grad_y^T x) each run as one scaled fp8 matrix product. On CUDA the products go through
// at::_scaled_mm (cuBLASLt for tensorwise scales, CUTLASS for rowwise ones, sm_89 and newer); on
// the CPU they are emulated: the operands are quantised to the same fp8 values with the same
// scales, dequantised, and multiplied in fp32, so the CPU parity tests check the same arithmetic.
//
// Tensor parallelism: where a scale is computed over a dimension split across the tp ranks, its
// amax is all-reduced (MAX) over the group, so every rank quantises its shard with the scale the
// whole tensor has at tp = 1.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>

#include "triax/fp8_options.hpp"
#include "triax/layers/tensor_parallel.hpp"

namespace triax {

class Fp8WeightCache;

struct Fp8LinearPlan {
  Fp8Recipe recipe = Fp8Recipe::Tensorwise;
  TensorParallel tp;
  // Which dimension of the whole layer this rank holds a shard of (both false at tp = 1):
  bool input_features_sharded = false;   // row-parallel: x [.., in/tp], the weight [out, in/tp]
  bool output_features_sharded = false;  // column-parallel: the weight [out/tp, in], y [.., out/tp]
  // Tensorwise: the layer's fp8 weight kept across the micro-batches of a step (null: cast at
  // every use).
  std::shared_ptr<Fp8WeightCache> weight_cache;
};

// x [..., in] (the model's dtype), weight [out, in] -> [..., out] in x's dtype. No bias: the
// layers add theirs after the product (or after the tp reduction).
at::Tensor fp8_linear(const at::Tensor& x, const at::Tensor& weight, const Fp8LinearPlan& plan);

}  // namespace triax
