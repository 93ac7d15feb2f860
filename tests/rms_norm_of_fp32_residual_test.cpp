// rms_norm_of_fp32_residual (triax/layers/fp32_residual_norm.hpp): the norm in front of a Mamba
// block whose residual stream is fp32 (residual_in_fp32), in training. RmsNormOfFp32ResidualCpu:
// the composition returns the residual itself and rms_norm of its cast, and its gradients are
// the residual stream's plus the norm's cast to fp32; a weight of another size is refused.
// RmsNormOfFp32ResidualCuda (label gpu; skipped without a GPU): the kernels' norm, residual
// gradient (fp32, the residual stream's gradient added) and weight gradient equal, bit for bit,
// those of the unfused CUDA path (cast, rms_norm's kernel, autograd's cast and sum), for bf16,
// fp16 and fp32 weights (fp32: the residual's gradient within 1e-6, its add fused) at Mamba's hidden sizes (768, 1536),
// an odd size (no vector path) and rows 1 and 1,055; the forward dispatches no LibTorch cast or add.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <string>
#include <vector>

#include "dispatched_ops.hpp"
#include "kernel_test_support.hpp"
#include "triax/layers/fp32_residual_norm.hpp"
#include "triax/layers/fused_ops.hpp"

namespace rms_norm_of_fp32_residual_test {  // named: the tests compile in unity batches

constexpr double kEps = 1e-5;

using triax::kernel_testing::seeded;

// The results of one path: the norm, and the gradients of the residual and the weight for the
// residual stream's gradient `grad_residual` and the norm's `grad_normed`.
struct Results {
  at::Tensor normed, grad_residual, grad_weight;
};

// fused: rms_norm_of_fp32_residual; else the unfused block's ops (the cast, rms_norm).
Results run(const at::Tensor& residual_in, const at::Tensor& weight_in, const at::Tensor& grad_residual,
            const at::Tensor& grad_normed, bool fused) {
  const at::Tensor residual = residual_in.detach().clone().requires_grad_(true);
  const at::Tensor weight = weight_in.detach().clone().requires_grad_(true);
  at::Tensor through, normed;
  if (fused) {
    std::tie(through, normed) = triax::rms_norm_of_fp32_residual(residual, weight, kEps);
  } else {
    through = residual;
    normed = triax::rms_norm(residual.to(weight.scalar_type()), weight, kEps);
  }
  torch::autograd::backward({through, normed}, {grad_residual, grad_normed});
  return {normed.detach(), residual.grad(), weight.grad()};
}

// exact_residual_gradient: bit for bit (16-bit weights), else within 1e-6 of the largest (an fp32
// weight, whose kernel may fuse the add with the norm's last multiply).
void expect_equal(const Results& got, const Results& want, bool exact_residual_gradient = true) {
  EXPECT_TRUE(at::equal(got.normed, want.normed)) << "the norm";
  ASSERT_EQ(got.grad_residual.scalar_type(), at::kFloat);
  if (exact_residual_gradient)
    EXPECT_TRUE(at::equal(got.grad_residual, want.grad_residual)) << "the residual's gradient";
  else
    EXPECT_LE((got.grad_residual - want.grad_residual).abs().max().item<double>(),
              1e-6 * want.grad_residual.abs().max().item<double>())
        << "the residual's gradient";
  EXPECT_TRUE(at::equal(got.grad_weight, want.grad_weight)) << "the weight's gradient";
}

struct Operands {
  at::Tensor residual, weight, grad_residual, grad_normed;
};

Operands operands(const std::vector<int64_t>& shape, c10::ScalarType dtype, uint64_t seed) {
  return {seeded(shape, seed, at::kFloat, 3.0), seeded({shape.back()}, seed + 1, dtype, 0.2) + 1.0,
          seeded(shape, seed + 2, at::kFloat, 0.1), seeded(shape, seed + 3, dtype)};
}

TEST(RmsNormOfFp32ResidualCpu, IsTheCompositionAndPassesTheResidualThrough) {
  for (c10::ScalarType dtype : {at::kBFloat16, at::kFloat}) {
    SCOPED_TRACE(c10::toString(dtype));
    const Operands in = operands({3, 7, 64}, dtype, 11);
    const auto [through, normed] = triax::rms_norm_of_fp32_residual(in.residual, in.weight, kEps);
    EXPECT_TRUE(through.is_same(in.residual));
    ASSERT_EQ(normed.scalar_type(), dtype);
    EXPECT_TRUE(at::equal(normed, triax::rms_norm(in.residual.to(dtype), in.weight, kEps)));
    const Results got = run(in.residual, in.weight, in.grad_residual, in.grad_normed, true);
    expect_equal(got, run(in.residual, in.weight, in.grad_residual, in.grad_normed, false));
    // Not just the residual stream's gradient: the norm's part is there.
    EXPECT_FALSE(at::equal(got.grad_residual, in.grad_residual));
  }
  EXPECT_THROW(triax::rms_norm_of_fp32_residual(seeded({2, 16}, 1, at::kFloat), seeded({8}, 2, at::kFloat), kEps),
               std::exception);
}

TEST(RmsNormOfFp32ResidualCuda, KernelsEqualTheUnfusedPath) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  ASSERT_TRUE(triax::fused_kernels_enabled());
  const c10::Device cuda(c10::kCUDA, 0);
  for (c10::ScalarType dtype : {at::kBFloat16, at::kHalf, at::kFloat})
    for (const std::vector<int64_t>& shape :
         std::vector<std::vector<int64_t>>{{1, 1, 768}, {5, 211, 768}, {2, 64, 1536}, {3, 5, 37}}) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + " hidden " + std::to_string(shape.back()) + " rows " +
                   std::to_string(shape[0] * shape[1]));
      const Operands in = operands(shape, dtype, 31 + shape.back());
      const at::Tensor residual = in.residual.to(cuda), weight = in.weight.to(cuda);
      const at::Tensor grad_residual = in.grad_residual.to(cuda), grad_normed = in.grad_normed.to(cuda);
      EXPECT_EQ(count_dispatched_ops([&] { triax::rms_norm_of_fp32_residual(residual, weight, kEps); },
                                     {"aten::add", "aten::to", "aten::copy_", "aten::_to_copy"}),
                0)
          << "ran the composition, not the kernel";
      expect_equal(run(residual, weight, grad_residual, grad_normed, true),
                   run(residual, weight, grad_residual, grad_normed, false), dtype != at::kFloat);
    }
}

}  // namespace rms_norm_of_fp32_residual_test
