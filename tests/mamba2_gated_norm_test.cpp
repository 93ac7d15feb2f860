// The Mamba-2 mixer's gated norm (plugins/models/mamba2/mixer/gated_norm.hpp): its autograd
// function against autograd through the LibTorch composition, on CPU in fp64 (the function's
// LibTorch formulas, with the strided views the mixer passes) and (Mamba2GatedNormCuda, with a
// GPU) through every generation of CUDA kernels (TRIAX_MAMBA2_GATED_NORM_KERNEL=v1, v2, v3) in
// fp32, bf16 and fp16, on the mixer's strided views, outputs and every input's gradient.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gated_norm.hpp"
#include "mamba_scan_test_support.hpp"
#include "model_reference_support.hpp"
#include "scoped_variable.hpp"

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
  EXPECT_STREQ(triax::mamba2::gated_norm_kernels_used(args, at::kDouble), "composition");
  EXPECT_TRUE(triax::mamba2::gated_rms_norm(args, at::kDouble)
                  .equal(triax::mamba2::gated_rms_norm_composed(args, at::kDouble)));
}

// ---- the CUDA kernels (Mamba2GatedNormCuda, label gpu) ----------------------------------------

// A CUDA case: rows = batch x length, heads of head_dim channels in `groups` norm groups; x and z
// column ranges of one [b, l, width] tensor, as the mixer splits in_proj's output.
struct Layout {
  int64_t batch, length, heads, head_dim, groups, width, x_offset, z_offset;
};

// mamba2-780m's layer (48 heads of 64, one group; z and x from a 6448-wide in_proj output) on 300 rows.
constexpr Layout k780mLike{2, 150, 48, 64, 1, 6448, 3072, 0};
// Three groups, x at an odd column: no 16-byte vectors, each element loaded alone.
constexpr Layout kThreeGroupsUnaligned{2, 7, 6, 8, 3, 2 * 48 + 5, 48 + 2, 0};
// Two groups, every view on whole vectors.
constexpr Layout kTwoGroupsAligned{3, 5, 8, 16, 2, 2 * 128 + 8, 128 + 8, 0};
// 15 channels (heads of 5): rows that no vector tiles.
constexpr Layout kOddChannels{2, 9, 3, 5, 1, 2 * 15 + 3, 15 + 3, 0};
// 6144 channels in one group: four bf16 vectors per thread; in fp32 (1536 vectors) beyond v2: v1.
constexpr Layout kWideGroup{1, 40, 96, 64, 1, 2 * 6144, 6144, 0};
// The 780m layer on 2,560 rows: v3's blocks (a few per SM) each walk several rows, loading the next
// while they write one.
constexpr Layout k780mManyRows{2, 1280, 48, 64, 1, 6448, 3072, 0};

struct CudaInputs {
  GatedNormArgs exact;  // fp64, holding the values the GPU's types round to
  GatedNormArgs gpu;    // x, z views of one wide tensor of `act`; y of `y_type`; D, weight fp32
};

CudaInputs cuda_inputs(const Layout& l, c10::ScalarType act, c10::ScalarType y_type, uint64_t seed) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
  const at::TensorOptions f64 = at::TensorOptions().dtype(at::kDouble);
  const int64_t d = l.heads * l.head_dim;
  const at::Tensor wide = at::randn({l.batch, l.length, l.width}, g, f64).to(act).to(at::kDouble);
  CudaInputs in;
  in.exact.y = at::randn({l.batch, l.length, l.heads, l.head_dim}, g, f64).to(y_type).to(at::kDouble);
  in.exact.D = at::randn({l.heads}, g, f64);
  in.exact.weight = 1.0 + 0.1 * at::randn({d}, g, f64);
  in.exact.groups = l.groups;
  in.exact.eps = 1e-5;
  in.gpu = in.exact;
  for (auto [args, source] : {std::pair{&in.exact, wide}, std::pair{&in.gpu, wide.to(at::kCUDA, act)}}) {
    args->x = source.narrow(2, l.x_offset, d).view({l.batch, l.length, l.heads, l.head_dim});
    args->z = source.narrow(2, l.z_offset, d);
  }
  in.gpu.y = in.exact.y.to(at::kCUDA, y_type);
  for (at::Tensor* t : {&in.gpu.D, &in.gpu.weight}) *t = t->to(at::kCUDA, at::kFloat);
  return in;
}

// `kernel` ("v1", "v2" or "v3") against the composition in fp64 on the same rounded values: output
// and the five gradients within 1e-4 (fp32) or 1e-2 (16-bit) of the largest value. `runs`: the
// kernels the choice gives these operands (v3 leaves rows off whole 16-byte vectors to v2).
void expect_kernel_matches(const char* kernel, const Layout& layout, c10::ScalarType act, c10::ScalarType y_type,
                           const char* runs = nullptr) {
  ScopedVariable choice("TRIAX_MAMBA2_GATED_NORM_KERNEL", kernel);
  const CudaInputs in = cuda_inputs(layout, act, y_type, 4);
  const std::string label = std::string(kernel) + " " + c10::toString(act) + " y " + c10::toString(y_type) +
                            " channels " + std::to_string(layout.heads * layout.head_dim / layout.groups) + " groups " +
                            std::to_string(layout.groups);
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(5);
  const at::Tensor weight_out = at::randn(in.exact.z.sizes(), g, at::kDouble);
  const auto expected = output_and_gradients(in.exact, triax::mamba2::gated_rms_norm_composed, at::kDouble, weight_out);
  ASSERT_TRUE(triax::mamba2::gated_norm_kernels_apply(in.gpu, act)) << label;
  EXPECT_STREQ(triax::mamba2::gated_norm_kernels_used(in.gpu, act), runs ? runs : kernel) << label;
  // A kernel's refusal to launch names the case (an exception alone would not).
  std::vector<at::Tensor> got;
  try {
    got = output_and_gradients(in.gpu, triax::mamba2::gated_rms_norm, act, weight_out.to(at::kCUDA, at::kFloat));
  } catch (const std::exception& e) {
    FAIL() << label << ": " << e.what();
  }
  EXPECT_EQ(got[0].scalar_type(), act) << label;
  EXPECT_EQ(got[1].scalar_type(), y_type) << label;  // y's gradient in y's type: the SSD's backward reads it so
  const double tolerance = act == at::kFloat ? 1e-4 : 1e-2;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(got[i].is_cuda()) << i;
    EXPECT_LT(mamba_scan_test::relative_error(got[i], expected[i]), tolerance)
        << "output (0) or input " << i << ": " << label;
  }
}

// Named for the first two generations; v3 (v2's forward, its own backward) runs the same cases.
TEST(Mamba2GatedNormCuda, BothKernelsMatchTheComposition) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  for (const char* kernel : {"v1", "v2", "v3"}) {
    const bool v3 = std::string(kernel) == "v3";
    expect_kernel_matches(kernel, k780mLike, at::kFloat, at::kFloat);
    expect_kernel_matches(kernel, k780mLike, at::kBFloat16, at::kFloat);
    expect_kernel_matches(kernel, k780mLike, at::kBFloat16, at::kBFloat16);
    expect_kernel_matches(kernel, k780mLike, at::kHalf, at::kFloat);
    for (const Layout* layout : {&kThreeGroupsUnaligned, &kTwoGroupsAligned, &kOddChannels}) {
      // v3 takes only operands on whole 16-byte vectors: of these, the two aligned groups.
      const char* runs = v3 && layout != &kTwoGroupsAligned ? "v2" : kernel;
      expect_kernel_matches(kernel, *layout, at::kFloat, at::kFloat, runs);
      expect_kernel_matches(kernel, *layout, at::kBFloat16, at::kFloat, runs);
      expect_kernel_matches(kernel, *layout, at::kBFloat16, at::kBFloat16, runs);
    }
    // 768 bf16 vectors: v3's widest row, one a thread.
    expect_kernel_matches(kernel, kWideGroup, at::kBFloat16, at::kFloat);
  }
  expect_kernel_matches("v3", k780mManyRows, at::kBFloat16, at::kBFloat16);
  expect_kernel_matches("v3", k780mManyRows, at::kFloat, at::kFloat);
}

// A group's row beyond v2's registers (6144 fp32 channels) runs v1 under TRIAX_MAMBA2_GATED_NORM_KERNEL=v2.
TEST(Mamba2GatedNormCuda, V2LeavesRowsBeyondItsRegistersToV1) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  ScopedVariable choice("TRIAX_MAMBA2_GATED_NORM_KERNEL", "v2");
  EXPECT_STREQ(
      triax::mamba2::gated_norm_kernels_used(cuda_inputs(kWideGroup, at::kFloat, at::kFloat, 6).gpu, at::kFloat), "v1");
  EXPECT_STREQ(
      triax::mamba2::gated_norm_kernels_used(cuda_inputs(kWideGroup, at::kBFloat16, at::kFloat, 6).gpu, at::kBFloat16),
      "v2");
}

// v2 is the default (2.2x v1 on an H100); TRIAX_MAMBA2_GATED_NORM_KERNEL=v1 keeps v1, =v3 takes
// v3 (off by default until timed on a GPU).
TEST(Mamba2GatedNormCuda, V3RunsUnlessAnOlderOneIsAskedFor) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  const CudaInputs in = cuda_inputs(k780mLike, at::kBFloat16, at::kFloat, 8);
  {
    ScopedVariable unset("TRIAX_MAMBA2_GATED_NORM_KERNEL", nullptr);
    EXPECT_STREQ(triax::mamba2::gated_norm_kernels_used(in.gpu, at::kBFloat16), "v3");
  }
  {
    ScopedVariable choice("TRIAX_MAMBA2_GATED_NORM_KERNEL", "v2");
    EXPECT_STREQ(triax::mamba2::gated_norm_kernels_used(in.gpu, at::kBFloat16), "v2");
  }
  ScopedVariable choice("TRIAX_MAMBA2_GATED_NORM_KERNEL", "v1");
  EXPECT_STREQ(triax::mamba2::gated_norm_kernels_used(in.gpu, at::kBFloat16), "v1");
}

// v3 takes a group's row of up to 768 16-byte vectors (one a thread); wider rows run v2 where they
// fit its registers (1024 vectors), else v1.
TEST(Mamba2GatedNormCuda, V3LeavesRowsBeyondItsThreadsToOlderKernels) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  ScopedVariable choice("TRIAX_MAMBA2_GATED_NORM_KERNEL", "v3");
  // 8192 bf16 channels: 1024 vectors, within v2's registers, past v3's 768 threads.
  constexpr Layout kWiderGroup{1, 8, 128, 64, 1, 2 * 8192, 8192, 0};
  EXPECT_STREQ(
      triax::mamba2::gated_norm_kernels_used(cuda_inputs(kWiderGroup, at::kBFloat16, at::kFloat, 6).gpu, at::kBFloat16),
      "v2");
  EXPECT_STREQ(
      triax::mamba2::gated_norm_kernels_used(cuda_inputs(kWideGroup, at::kFloat, at::kFloat, 6).gpu, at::kFloat), "v1");
}

// v2's and v3's backwards sum the weight's and D's terms in a fixed order: two runs give the same bits.
TEST(Mamba2GatedNormCuda, V2AndV3GiveTheSameBitsTwice) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  for (const char* kernel : {"v2", "v3"}) {
    ScopedVariable choice("TRIAX_MAMBA2_GATED_NORM_KERNEL", kernel);
    const CudaInputs in = cuda_inputs(k780mLike, at::kBFloat16, at::kFloat, 7);
    ASSERT_STREQ(triax::mamba2::gated_norm_kernels_used(in.gpu, at::kBFloat16), kernel);
    const at::Tensor weight_out = at::randn(in.gpu.z.sizes(), in.gpu.D.options());
    const auto first = output_and_gradients(in.gpu, triax::mamba2::gated_rms_norm, at::kBFloat16, weight_out);
    const auto second = output_and_gradients(in.gpu, triax::mamba2::gated_rms_norm, at::kBFloat16, weight_out);
    for (size_t i = 0; i < first.size(); ++i)
      EXPECT_TRUE(first[i].equal(second[i])) << kernel << ": output (0) or input " << i;
  }
}

}  // namespace
