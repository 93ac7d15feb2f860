// decode_gemv (decode_gemv.hpp): the GEMV kernel of a decoding step's linear layers against the
// LibTorch product in fp32 (DecodeGemvCuda, ctest label gpu, skipped without a GPU), and where it
// leaves the product to the GEMM (DecodeGemvCpu: CPU tensors, more rows than it takes). Its SwiGLU
// variant, decode_gate_up_swiglu: the bits of the product then swiglu_halves on CUDA, the two ops
// on CPU, and nothing where a gradient is wanted or there are more rows. Long rows split over a
// block's warps, and with TRIAX_DECODE_GEMV_SPLIT_K=0 not, against the product in fp32.
#include "triax/layers/decode_gemv.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "scoped_variable.hpp"
#include "triax/layers/fused_ops.hpp"

namespace {

// Read once by the library: set before the first product.
const bool kSwitchedOn = setenv("TRIAX_DECODE_GEMV", "1", 1) == 0;

at::Tensor seeded(const std::vector<int64_t>& shape, uint64_t seed, c10::ScalarType dtype, c10::Device device) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn(shape, generator, at::TensorOptions().dtype(at::kDouble)).to(device, dtype);
}

TEST(DecodeGemvCpu, LeavesCpuTensorsToTheGemm) {
  ASSERT_TRUE(kSwitchedOn);
  EXPECT_FALSE(triax::decode_gemv(at::ones({1, 1, 16}), at::ones({8, 16})).defined());
}

TEST(DecodeGemvCpu, GateUpSwigluIsTheTwoOpsAndOnlyAtDecodingSizes) {
  const at::Tensor x = seeded({2, 1, 16}, 1, at::kFloat, at::kCPU), w = seeded({24, 16}, 2, at::kFloat, at::kCPU);
  const at::Tensor y = triax::decode_gate_up_swiglu(x, w);
  ASSERT_TRUE(y.defined());
  EXPECT_TRUE(at::equal(y, triax::swiglu_halves(at::linear(x, w))));
  EXPECT_FALSE(triax::decode_gate_up_swiglu(seeded({5, 16}, 1, at::kFloat, at::kCPU), w).defined());
  EXPECT_FALSE(triax::decode_gate_up_swiglu(x, w.clone().requires_grad_(true)).defined());
}

TEST(DecodeGemvCuda, GateUpSwigluHasTheBitsOfTheProductThenSwiglu) {
  ASSERT_TRUE(kSwitchedOn);
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  // 1.7b's gate/up projection (2 x 8192 rows over 2048), and a small one.
  const std::vector<std::pair<int64_t, int64_t>> shapes{{2048, 8192}, {64, 40}};
  for (const c10::ScalarType dtype : {at::kBFloat16, at::kFloat})
    for (const auto& [in, half] : shapes)
      for (int64_t rows = 1; rows <= 4; ++rows) {
        const at::Tensor x = seeded({rows, 1, in}, 3, dtype, at::kCUDA);
        const at::Tensor w = seeded({2 * half, in}, 4, dtype, at::kCUDA);
        const std::string what = std::string(c10::toString(dtype)) + " rows " + std::to_string(rows) + " [2 x " +
                                 std::to_string(half) + ", " + std::to_string(in) + "]";
        const at::Tensor y = triax::decode_gate_up_swiglu(x, w);
        const at::Tensor product = triax::decode_gemv(x, w);
        ASSERT_TRUE(y.defined() && product.defined()) << what;
        ASSERT_EQ(y.sizes(), (std::vector<int64_t>{rows, 1, half})) << what;
        EXPECT_TRUE(at::equal(y, triax::swiglu_halves(product))) << what;
      }
}

// decode_gemv of 1 to 4 rows against the product in fp64, at each [out, in] of `shapes`.
void expect_the_product_in_fp32(const std::vector<std::pair<int64_t, int64_t>>& shapes) {
  for (const c10::ScalarType dtype : {at::kBFloat16, at::kFloat})
    for (const auto& [in, out] : shapes)
      for (int64_t rows = 1; rows <= 4; ++rows) {
        const at::Tensor x = seeded({rows, 1, in}, 1, dtype, at::kCUDA), w = seeded({out, in}, 2, dtype, at::kCUDA);
        const at::Tensor y = triax::decode_gemv(x, w);
        const std::string what = std::string(c10::toString(dtype)) + " rows " + std::to_string(rows) + " [" +
                                 std::to_string(out) + ", " + std::to_string(in) + "]";
        ASSERT_TRUE(y.defined()) << what;
        ASSERT_EQ(y.sizes(), (std::vector<int64_t>{rows, 1, out})) << what;
        const at::Tensor expected = at::matmul(x.to(at::kDouble), w.to(at::kDouble).t());
        const double error = (y.to(at::kDouble) - expected).abs().max().item<double>() /
                             expected.abs().max().item<double>();
        EXPECT_LE(error, dtype == at::kFloat ? 1e-5 : 1e-2) << what;
      }
}

TEST(DecodeGemvCuda, EqualsTheProductInFp32) {
  ASSERT_TRUE(kSwitchedOn);
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  // 1.7b's o_proj, q/k/v, down_proj; an odd number of features.
  expect_the_product_in_fp32({{2048, 2048}, {2048, 6144}, {8192, 2048}, {64, 37}});
  // Five rows: the GEMM's.
  EXPECT_FALSE(triax::decode_gemv(seeded({5, 64}, 1, at::kBFloat16, at::kCUDA), seeded({8, 64}, 2, at::kBFloat16, at::kCUDA))
                   .defined());
}

// Rows of 4096 and more split over a block's warps (kernels::gemv_long_rows, the default).
// 1.7b's down_proj (8192: whole chunks of loads); 4128 (bf16 and fp32: parts that end in fewer
// than a chunk of vectors); 4112 (fp32 splits it with a tail, bf16's parts would not be whole
// vectors: the plain kernel); 4096. With TRIAX_DECODE_GEMV_SPLIT_K=0, a warp per feature.
TEST(DecodeGemvCuda, LongRowsSplitOrNotEqualTheProductInFp32) {
  ASSERT_TRUE(kSwitchedOn);
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const std::vector<std::pair<int64_t, int64_t>> long_rows = {{8192, 2048}, {4128, 40}, {4112, 33}, {4096, 96}};
  expect_the_product_in_fp32(long_rows);
  ScopedVariable plain("TRIAX_DECODE_GEMV_SPLIT_K", "0");
  expect_the_product_in_fp32(long_rows);
}

}  // namespace
