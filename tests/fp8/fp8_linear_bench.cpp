// bf16 against fp8 per linear shape, forward + backward of one layer on one GPU, to place
// fp8.min_gemm_size (docs/fp8.md, "Which layers"): for each linear of SmolLM-135M, 360M and 1.7B
// (the fused q/k/v, the output projection, the fused gate/up, the down projection) at the tokens
// of one micro-batch of their bench configs, milliseconds per call in bf16 (at::linear), in fp8
// tensorwise casting the weight at every call (one micro-batch a step), and in fp8 with the
// weight cast once (its copy kept, as over the micro-batches of a step), and the ratios. Built
// only with -DTRIAX_CUDA=ON, not run by ctest:
//
//   fp8_linear_bench [MODEL...]      (135m, 360m, 1.7b; all three when none is named)
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../gpu_timing.hpp"
#include "bench_shapes.hpp"
#include "triax/layers/fp8_linear.hpp"
#include "triax/layers/fp8_weight_cache.hpp"

namespace {

struct LinearShape {
  const char* model;
  const char* layer;
  int64_t tokens, out, in;  // M, N, K
};

// hidden, heads x 64 for q and kv heads x 64 for k and v, ffn; micro-batch x 2048 tokens.
const LinearShape kShapes[] = {
    {"135m", "qkv", 16 * 2048, 960, 576},       {"135m", "o", 16 * 2048, 576, 576},
    {"135m", "gate_up", 16 * 2048, 3072, 576},  {"135m", "down", 16 * 2048, 576, 1536},
    {"360m", "qkv", 8 * 2048, 1600, 960},       {"360m", "o", 8 * 2048, 960, 960},
    {"360m", "gate_up", 8 * 2048, 5120, 960},   {"360m", "down", 8 * 2048, 960, 2560},
    {"1.7b", "qkv", 8 * 2048, 6144, 2048},      {"1.7b", "o", 8 * 2048, 2048, 2048},
    {"1.7b", "gate_up", 8 * 2048, 16384, 2048}, {"1.7b", "down", 8 * 2048, 2048, 8192},
};

// Forward and backward of y = x W^T through `product`, the gradients of x and W computed.
double time_forward_backward(const LinearShape& shape,
                             const std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>& product) {
  const auto options = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  const at::Tensor x = at::randn({shape.tokens, shape.in}, options).requires_grad_(true);
  const at::Tensor weight = (at::randn({shape.out, shape.in}, options) * 0.02).requires_grad_(true);
  const at::Tensor grad_y = at::randn({shape.tokens, shape.out}, options);
  return triax::bench::time_ms([&] {
    x.mutable_grad().reset();
    weight.mutable_grad().reset();
    product(x, weight).backward(grad_y);
  });
}

void report(const LinearShape& shape) {
  triax::Fp8LinearPlan every_call;
  every_call.recipe = triax::Fp8Recipe::Tensorwise;
  triax::Fp8LinearPlan kept = every_call;
  kept.weight_cache = std::make_shared<triax::Fp8WeightCache>();
  const double bf16 =
      time_forward_backward(shape, [](const at::Tensor& x, const at::Tensor& w) { return at::linear(x, w); });
  const double fp8 = time_forward_backward(
      shape, [&](const at::Tensor& x, const at::Tensor& w) { return triax::fp8_linear(x, w, every_call); });
  const double fp8_kept = time_forward_backward(
      shape, [&](const at::Tensor& x, const at::Tensor& w) { return triax::fp8_linear(x, w, kept); });
  std::printf(
      "%-5s %-8s M %6lld N %6lld K %6lld  min(N,K) %5lld  bf16 %7.3f ms  fp8 %7.3f ms (%.2fx)  "
      "fp8, weight kept %7.3f ms (%.2fx)\n",
      shape.model, shape.layer, static_cast<long long>(shape.tokens), static_cast<long long>(shape.out),
      static_cast<long long>(shape.in), static_cast<long long>(std::min(shape.out, shape.in)), bf16, fp8, bf16 / fp8,
      fp8_kept, bf16 / fp8_kept);
}

}  // namespace

int main(int argc, char** argv) {
  return triax::bench::report_models(
      argc, argv, "fp8_linear_bench",
      "forward + backward of one linear, bf16 against fp8 tensorwise (speed-up = bf16 / fp8)", {"135m", "360m", "1.7b"},
      kShapes, report);
}
