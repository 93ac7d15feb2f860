// The MoE experts' forward + backward on one GPU in bf16 (at::_grouped_mm) against fp8
// (at::_scaled_grouped_mm with rowwise scales, docs/fp8.md "The MoE experts"), milliseconds per
// call and the ratio, at moe-1b's layer (8 experts, hidden 1024, intermediate 2048, one
// micro-batch of 8 x 2048 tokens routed top-2) and at twice its width. The routed counts are
// uneven (drawn from a skewed router). Built only with -DTRIAX_CUDA=ON, not run by ctest:
//
//   moe_fp8_experts_bench
#include <ATen/ATen.h>

#include <cstdio>
#include <string>
#include <vector>

#include "gpu_timing.hpp"
#include "grouped_experts.hpp"
#include "triax/layers/fp8_grouped_linear.hpp"

namespace {

struct ExpertsShape {
  const char* name;
  int64_t rows, experts, hidden, intermediate;
};

const ExpertsShape kShapes[] = {
    {"moe-1b", 8 * 2048 * 2, 8, 1024, 2048},
    {"moe-1b x2 wide", 8 * 2048 * 2, 8, 2048, 4096},
};

// Rows per expert for `rows` routed rows, from a softmax over N(0, 0.5^2) logits: some imbalance.
std::vector<int64_t> routed_counts(int64_t rows, int64_t experts) {
  at::manual_seed(1);
  const at::Tensor share = at::softmax(at::randn({experts}) * 0.5, 0);
  std::vector<int64_t> counts(static_cast<size_t>(experts));
  int64_t given = 0;
  for (int64_t e = 0; e + 1 < experts; ++e) given += counts[e] = static_cast<int64_t>(share[e].item<double>() * rows);
  counts.back() = rows - given;
  return counts;
}

}  // namespace

int main() {
  if (!at::hasCUDA()) {
    std::fprintf(stderr, "moe_fp8_experts_bench: no CUDA device\n");
    return 1;
  }
  const at::TensorOptions options = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  std::printf("| shape | bf16 ms | fp8 ms | bf16/fp8 |\n|---|---|---|---|\n");
  for (const ExpertsShape& s : kShapes) {
    const std::vector<int64_t> counts = routed_counts(s.rows, s.experts);
    const at::Tensor rows = at::randn({s.rows, s.hidden}, options).requires_grad_();
    const at::Tensor gate = (at::randn({s.experts, s.intermediate, s.hidden}, options) * 0.02).requires_grad_();
    const at::Tensor up = (at::randn({s.experts, s.intermediate, s.hidden}, options) * 0.02).requires_grad_();
    const at::Tensor down = (at::randn({s.experts, s.hidden, s.intermediate}, options) * 0.02).requires_grad_();
    const at::Tensor grad = at::randn({s.rows, s.hidden}, options);
    const std::string unavailable = triax::fp8_grouped_products_unavailable(rows, up);
    if (!unavailable.empty()) {
      std::fprintf(stderr, "moe_fp8_experts_bench: %s\n", unavailable.c_str());
      return 1;
    }
    auto step = [&](auto implementation) {
      return [&, implementation] {
        for (const at::Tensor& t : {rows, gate, up, down}) const_cast<at::Tensor&>(t).mutable_grad() = at::Tensor();
        implementation(rows, counts, gate, up, down).backward(grad);
      };
    };
    const double bf16 = triax::bench::time_ms(step(triax::moe::experts_grouped_mm));
    const double fp8 = triax::bench::time_ms(step(triax::moe::experts_fp8_grouped_mm));
    std::printf("| %s (%lld rows, %lld experts, %lld x %lld) | %.3f | %.3f | %.2fx |\n", s.name,
                static_cast<long long>(s.rows), static_cast<long long>(s.experts), static_cast<long long>(s.hidden),
                static_cast<long long>(s.intermediate), bf16, fp8, bf16 / fp8);
  }
  return 0;
}
