// add_rms_norm_fp32_residual (triax/layers/fused_ops.hpp): the residual add before a norm with
// the residual stream kept in fp32 (Mamba's residual_in_fp32, at inference; in mamba_test, whose
// blocks decode with it). AddRmsNormFp32ResidualCpu: the sum is residual + y in fp32 exactly, the
// norm that of the sum cast to y's dtype (rms_norm of the cast, bit for bit, and the fp64 norm
// within 1e-2), a residual of another dtype or shape is refused. AddRmsNormFp32ResidualCuda
// (label gpu; skipped without a GPU): one kernel, no LibTorch add or cast, whose sum equals the
// fp32 CPU composition bit for bit and whose norm is within y's tolerance of it and equal to
// rms_norm's kernel on the cast sum, at Mamba-130m's hidden size (768), a SmolLM size and an odd
// size (no vector path), rows 1, 32 and 1,055.
#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "dispatched_ops.hpp"
#include "kernel_test_support.hpp"
#include "triax/layers/fused_ops.hpp"

namespace {

constexpr double kEps = 1e-5;

using triax::kernel_testing::seeded;

// The operands on the CPU: an fp32 residual stream, y (a mixer's output) and the norm's weight in dtype.
struct Operands {
  at::Tensor residual, y, weight;
};

Operands operands(const std::vector<int64_t>& shape, c10::ScalarType dtype, uint64_t seed) {
  return {seeded(shape, seed, at::kFloat, 3.0), seeded(shape, seed + 1, dtype),
          seeded({shape.back()}, seed + 2, dtype, 0.2) + 1.0};
}

// The norm in fp64 of the sum rounded to dtype: what the op computes before its last roundings.
at::Tensor fp64_norm(const at::Tensor& sum, const at::Tensor& weight, c10::ScalarType dtype) {
  const at::Tensor x = sum.to(dtype).to(at::kDouble);
  return x * at::rsqrt(x.pow(2).mean(-1, true) + kEps) * weight.to(at::kDouble);
}

TEST(AddRmsNormFp32ResidualCpu, MatchesTheComposition) {
  for (c10::ScalarType dtype : {at::kBFloat16, at::kFloat}) {
    SCOPED_TRACE(c10::toString(dtype));
    const Operands in = operands({3, 7, 768}, dtype, 11);
    const auto [sum, normed] = triax::add_rms_norm_fp32_residual(in.residual, in.y, in.weight, kEps);
    ASSERT_EQ(sum.scalar_type(), at::kFloat);
    ASSERT_EQ(normed.scalar_type(), dtype);
    EXPECT_TRUE(at::equal(sum, in.residual + in.y.to(at::kFloat)));
    EXPECT_TRUE(at::equal(normed, triax::rms_norm(sum.to(dtype), in.weight, kEps)));
    triax::kernel_testing::expect_close(normed, fp64_norm(sum, in.weight, dtype), dtype == at::kFloat ? 1e-5 : 1e-2,
                                        "norm");
  }
  const Operands in = operands({2, 16}, at::kBFloat16, 21);
  EXPECT_THROW(triax::add_rms_norm_fp32_residual(in.residual.to(at::kBFloat16), in.y, in.weight, kEps),
               std::exception);
  EXPECT_THROW(triax::add_rms_norm_fp32_residual(in.residual.narrow(1, 0, 8), in.y, in.weight, kEps),
               std::exception);
}

// The LibTorch adds and casts `work` dispatches: the composition's, none of the kernel's.
int64_t count_composition_ops(const std::function<void()>& work) {
  return count_dispatched_ops(work, {"aten::add", "aten::to", "aten::copy_"});
}

TEST(AddRmsNormFp32ResidualCuda, KernelMatchesTheComposition) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  ASSERT_TRUE(triax::fused_kernels_enabled());
  const c10::Device cuda(c10::kCUDA, 0);
  for (c10::ScalarType dtype : {at::kBFloat16, at::kHalf, at::kFloat})
    for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{
             {1, 1, 768}, {32, 1, 768}, {5, 211, 768}, {4, 3, 576}, {3, 5, 37}}) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + " hidden " + std::to_string(shape.back()) + " rows " +
                   std::to_string(shape[0] * shape[1]));
      const Operands in = operands(shape, dtype, 31 + shape.back());
      const at::Tensor residual = in.residual.to(cuda), y = in.y.to(cuda), weight = in.weight.to(cuda);
      at::Tensor sum, normed;
      EXPECT_EQ(count_composition_ops([&] {
                  std::tie(sum, normed) = triax::add_rms_norm_fp32_residual(residual, y, weight, kEps);
                }),
                0)
          << "ran the composition, not the kernel";
      ASSERT_EQ(sum.scalar_type(), at::kFloat);
      ASSERT_EQ(normed.scalar_type(), dtype);
      const auto [sum_ref, normed_ref] = triax::add_rms_norm_fp32_residual(in.residual, in.y, in.weight, kEps);
      EXPECT_TRUE(at::equal(sum.cpu(), sum_ref)) << "the fp32 sum";
      triax::kernel_testing::expect_close(normed.cpu(), normed_ref, dtype == at::kFloat ? 1e-5 : 1e-2, "norm");
      EXPECT_TRUE(at::equal(normed, triax::rms_norm(sum.to(dtype), weight, kEps))) << "rms_norm of the cast sum";
    }
}

}  // namespace
