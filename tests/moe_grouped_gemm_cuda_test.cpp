// The grouped expert GEMM on the GPU (at::_grouped_mm, bf16, sm_90 or later) against the
// per-expert loop, forward and backward, with empty and uneven groups, for SwiGLU and squared-ReLU
// experts. Skips without a GPU.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>

#include "grouped_experts.hpp"

namespace triax::moe {
namespace {

double relative_difference(const at::Tensor& a, const at::Tensor& b) {
  return ((a.to(at::kFloat) - b.to(at::kFloat)).abs().max() / b.to(at::kFloat).abs().max().clamp_min(1e-6))
      .item<double>();
}

TEST(MoeGroupedExpertsCuda, GroupedGemmEqualsTheLoopForwardAndBackward) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const at::TensorOptions options = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  at::manual_seed(7);
  const int64_t hidden = 256, features = 512;
  const std::vector<int64_t> counts = {40, 0, 1, 300, 7, 0, 128, 36};
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  const auto experts = static_cast<int64_t>(counts.size());
  const at::Tensor rows = at::randn({total, hidden}, options).requires_grad_();
  const at::Tensor gate = (at::randn({experts, features, hidden}, options) * 0.05).requires_grad_();
  const at::Tensor up = (at::randn({experts, features, hidden}, options) * 0.05).requires_grad_();
  const at::Tensor down = (at::randn({experts, hidden, features}, options) * 0.05).requires_grad_();
  if (!grouped_mm_applies(rows, gate)) GTEST_SKIP() << "the grouped GEMM needs compute capability 9.0 or later";
  const at::Tensor seed = at::randn({total, hidden}, options);
  // SwiGLU experts, then squared-ReLU ones (no gate projection).
  for (const bool gated : {true, false}) {
    SCOPED_TRACE(gated ? "swiglu" : "relu2");
    const at::Tensor gate_used = gated ? gate : at::Tensor();
    auto run = [&](auto implementation) {
      for (const at::Tensor& t : {rows, gate, up, down}) const_cast<at::Tensor&>(t).mutable_grad() = at::Tensor();
      at::Tensor out = implementation(rows, counts, gate_used, up, down);
      (out.to(at::kFloat) * seed.to(at::kFloat)).sum().backward();
      std::vector<at::Tensor> results{out.detach(), rows.grad().clone(), up.grad().clone(), down.grad().clone()};
      if (gated) results.push_back(gate.grad().clone());
      return results;
    };
    const auto loop = run(experts_loop), grouped = run(experts_grouped_mm);
    const char* names[] = {"output", "d rows", "d up_proj", "d down_proj", "d gate_proj"};
    // Both in bf16 with fp32 accumulation: they differ by rounding only.
    for (size_t i = 0; i < loop.size(); ++i) EXPECT_LT(relative_difference(grouped[i], loop[i]), 2e-2) << names[i];
    EXPECT_EQ(grouped[2][1].abs().max().item<double>(), 0.0);  // an expert without rows
    if (gated) {
      EXPECT_EQ(grouped[4][1].abs().max().item<double>(), 0.0);
    }
  }
}

}  // namespace
}  // namespace triax::moe
