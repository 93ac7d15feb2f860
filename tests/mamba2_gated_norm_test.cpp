// The Mamba-2 mixer's gated norm (plugins/models/mamba2/mixer/gated_norm.hpp): its autograd
// function against autograd through the LibTorch composition, on CPU in fp64 (the function's
// LibTorch formulas, with the strided views the mixer passes) and (Mamba2GatedNormCuda, with a
// GPU) through the CUDA kernels in fp32 and in bf16, outputs and every input's gradient.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "gated_norm.hpp"
#include "mamba_scan_test_support.hpp"
#include "model_reference_support.hpp"

namespace {

using triax::mamba2::GatedNormArgs;
using triax::test::max_abs_diff;

constexpr int64_t kBatch = 2, kLength = 7, kHeads = 6, kHeadDim = 8, kGroups = 3;

// fp64 inputs; x and z are strided views into wider tensors, as the mixer's split leaves them.
GatedNormArgs random_args(uint64_t seed) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
  const at::TensorOptions f64 = at::TensorOptions().dtype(at::kDouble);
  const int64_t d = kHeads * kHeadDim;
  GatedNormArgs a;
  a.y = at::randn({kBatch, kLength, kHeads, kHeadDim}, g, f64);
  a.x = at::randn({kBatch, kLength, d + 5}, g, f64).narrow(2, 2, d).view({kBatch, kLength, kHeads, kHeadDim});
  a.z = at::randn({kBatch, kLength, 2 * d}, g, f64).narrow(2, d, d);
  a.D = at::randn({kHeads}, g, f64);
  a.weight = 1.0 + 0.1 * at::randn({d}, g, f64);
  a.groups = kGroups;
  a.eps = 1e-5;
  return a;
}

std::vector<at::Tensor*> members(GatedNormArgs& a) { return {&a.y, &a.x, &a.z, &a.D, &a.weight}; }

using Norm = std::function<at::Tensor(const GatedNormArgs&, c10::ScalarType)>;

// The output and every input's gradient of sum(out w).
std::vector<at::Tensor> output_and_gradients(GatedNormArgs a, const Norm& norm, c10::ScalarType dtype,
                                             const at::Tensor& weight_out) {
  for (at::Tensor* t : members(a)) *t = t->detach().requires_grad_(true);
  const at::Tensor out = norm(a, dtype);
  (out.to(weight_out.scalar_type()) * weight_out).sum().backward();
  std::vector<at::Tensor> results{out.detach()};
  for (at::Tensor* t : members(a)) results.push_back(t->grad());
  return results;
}

TEST(Mamba2GatedNorm, FunctionEqualsTheCompositionInFp64) {
  const GatedNormArgs args = random_args(1);
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(2);
  const at::Tensor weight_out = at::randn({kBatch, kLength, kHeads * kHeadDim}, g, at::kDouble);
  const auto expected = output_and_gradients(args, triax::mamba2::gated_rms_norm_composed, at::kDouble, weight_out);
  const auto got = output_and_gradients(args, triax::mamba2::gated_rms_norm_function, at::kDouble, weight_out);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].defined()) << i;
    EXPECT_EQ(got[i].sizes(), expected[i].sizes()) << i;
    EXPECT_GT(expected[i].abs().max().item<double>(), 1e-3) << i;
    EXPECT_LT(max_abs_diff(got[i], expected[i]), 1e-10) << "output (0) or input " << i;
  }
}

// On CPU the mixer's entry point is the composition itself: the CPU path unchanged.
TEST(Mamba2GatedNorm, CpuTensorsTakeTheComposition) {
  const GatedNormArgs args = random_args(3);
  EXPECT_FALSE(triax::mamba2::gated_norm_kernels_apply(args, at::kDouble));
  EXPECT_TRUE(triax::mamba2::gated_rms_norm(args, at::kDouble)
                  .equal(triax::mamba2::gated_rms_norm_composed(args, at::kDouble)));
}

// The kernels (fp32; bf16 x, z and output with the SSD's fp32 y) against the composition in fp64
// on the same rounded values: outputs and gradients within 1e-4 (fp32) and 1e-2 (bf16) of the
// largest value.
TEST(Mamba2GatedNormCuda, MatchesTheCompositionInFp32AndBf16) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  GatedNormArgs exact = random_args(4);
  for (at::Tensor* t : {&exact.x, &exact.z}) *t = t->to(at::kBFloat16).to(at::kDouble);
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(5);
  const at::Tensor weight_out = at::randn({kBatch, kLength, kHeads * kHeadDim}, g, at::kDouble);
  const auto expected = output_and_gradients(exact, triax::mamba2::gated_rms_norm_composed, at::kDouble, weight_out);
  for (bool bf16 : {false, true}) {
    GatedNormArgs gpu = exact;
    for (at::Tensor* t : members(gpu)) *t = t->to(at::kCUDA, at::kFloat);
    if (bf16)
      for (at::Tensor* t : {&gpu.x, &gpu.z}) *t = t->to(at::kBFloat16);
    // Strided again on the GPU: the kernels read the view without a copy.
    gpu.z = at::cat({gpu.z, gpu.z}, 2).narrow(2, 0, kHeads * kHeadDim);
    const c10::ScalarType dtype = bf16 ? at::kBFloat16 : at::kFloat;
    ASSERT_TRUE(triax::mamba2::gated_norm_kernels_apply(gpu, dtype)) << "bf16 " << bf16;
    const auto got = output_and_gradients(gpu, triax::mamba2::gated_rms_norm, dtype, weight_out.to(at::kCUDA, at::kFloat));
    EXPECT_EQ(got[0].scalar_type(), dtype);
    const double tolerance = bf16 ? 1e-2 : 1e-4;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(got[i].is_cuda()) << i;
      EXPECT_LT(mamba_scan_test::relative_error(got[i], expected[i]), tolerance) << "output (0) or input " << i << " bf16 " << bf16;
    }
  }
}

}  // namespace
