// The fused casts of the grouped fp8 products' operands (sdk/src/fp8_grouped_casts.cpp,
// kernels/fp8_grouped_cast.cu) against LibTorch's composition they replace
// (TRIAX_FP8_GROUPED_FUSED_CASTS=0), bit for bit, on the GPU (label gpu, skipped without one):
// the fp8 bytes and the fp32 scales, rowwise (rows held in registers and rows longer than that,
// bf16 and fp32), per column of uneven row groups with a 16-row group (partial tiles), and the
// experts' weights stacked from two tensors, per row and per column with each expert transposed.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <string>
#include <vector>

#include "../scoped_variable.hpp"
#include "fp8_grouped_casts.hpp"

// Named: sdk_test compiles its files in one unity batch.
namespace fp8_grouped_cast_test {
namespace {

using triax::Fp8RowGroups;
using triax::fp8::Fp8Matrix;
namespace grouped = triax::grouped_fp8;

class Fp8GroupedCastCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  }
};

// The composition's result and the fused one's for the same call, and proof the kernels ran.
template <typename Cast>
std::pair<Fp8Matrix, Fp8Matrix> composed_and_fused(Cast cast) {
  Fp8Matrix composed, fused;
  {
    const ScopedVariable off("TRIAX_FP8_GROUPED_FUSED_CASTS", "0");
    composed = cast();
  }
  const int64_t before = grouped::fused_casts_run();
  {
    const ScopedVariable on("TRIAX_FP8_GROUPED_FUSED_CASTS", nullptr);
    fused = cast();
  }
  EXPECT_EQ(grouped::fused_casts_run() - before, 1) << "the fused kernels did not run";
  return {composed, fused};
}

// The same shape and bytes (fp8 read as bytes: NaN-free equality of every bit).
void expect_same_bytes(const at::Tensor& fused, const at::Tensor& composed, const std::string& what) {
  ASSERT_TRUE(fused.defined() && composed.defined()) << what;
  ASSERT_EQ(fused.sizes(), composed.sizes()) << what;
  ASSERT_EQ(fused.scalar_type(), composed.scalar_type()) << what;
  const at::Tensor a = fused.contiguous().view(at::kByte).cpu(), b = composed.contiguous().view(at::kByte).cpu();
  EXPECT_TRUE(at::equal(a, b)) << what << ": " << a.ne(b).sum().item<int64_t>() << " bytes differ";
}

void expect_same_scales(const at::Tensor& fused, const at::Tensor& composed, const std::string& what) {
  ASSERT_EQ(fused.sizes(), composed.sizes()) << what;
  const at::Tensor a = fused.cpu().view(at::kInt), b = composed.cpu().view(at::kInt);
  EXPECT_TRUE(at::equal(a, b)) << what << ": " << a.ne(b).sum().item<int64_t>() << " scales differ";
}

// N(0, 1) values with a spread of magnitudes over the rows and columns, an all-zero row (the amax
// floor) and a few large outliers.
at::Tensor operand(int64_t rows, int64_t cols, at::ScalarType dtype) {
  at::Tensor t =
      at::randn({rows, cols}, at::kFloat) * at::exp(at::randn({rows, 1}) * 2.0) * at::exp(at::randn({1, cols}));
  t[1].zero_();
  t[rows - 1][cols / 3] = 3.0e4;
  return t.to(at::TensorOptions().device(at::kCUDA).dtype(dtype));
}

TEST_F(Fp8GroupedCastCuda, RowwiseCastIsTheCompositionBitForBit) {
  at::manual_seed(11);
  // 1024 and 4096 columns fit the registers; 8208 (past 256 threads x 4 vectors x 8) reads again.
  for (const at::ScalarType dtype : {at::kBFloat16, at::kFloat})
    for (const int64_t cols : {16, 1024, 4096, 8208}) {
      const at::Tensor t = operand(48, cols, dtype);
      const auto [composed, fused] = composed_and_fused([&] { return grouped::per_row(t); });
      const std::string what = std::string(c10::toString(dtype)) + " x " + std::to_string(cols);
      expect_same_bytes(fused.data, composed.data, "data " + what);
      expect_same_scales(fused.scale, composed.scale, "scale " + what);
    }
}

TEST_F(Fp8GroupedCastCuda, GroupColumnCastIsTheCompositionBitForBit) {
  at::manual_seed(12);
  // Uneven groups, one of 16 rows; 256 rows and 200 columns leave partial 128 x 64 tiles.
  const Fp8RowGroups groups = Fp8RowGroups::of({48, 16, 160, 32}, at::kCUDA);
  for (const at::ScalarType dtype : {at::kBFloat16, at::kFloat})
    for (const int64_t cols : {200, 1024}) {
      const at::Tensor t = operand(groups.total(), cols, dtype);
      const auto [composed, fused] = composed_and_fused([&] { return grouped::per_group_column(t, groups); });
      const std::string what = std::string(c10::toString(dtype)) + " x " + std::to_string(cols);
      expect_same_bytes(fused.transposed, composed.transposed, "transposed " + what);
      expect_same_scales(fused.scale, composed.scale, "scale " + what);
    }
}

TEST_F(Fp8GroupedCastCuda, StackedWeightsCastAsTheirConcatenationBitForBit) {
  at::manual_seed(13);
  const int64_t experts = 3, n1 = 48, n2 = 80, k = 136;
  const at::Tensor first = operand(experts * n1, k, at::kBFloat16).view({experts, n1, k});
  const at::Tensor second = operand(experts * n2, k, at::kBFloat16).view({experts, n2, k});
  for (const bool both : {true, false}) {
    const at::Tensor more = both ? second : at::Tensor();
    const std::string what = both ? "gate and up" : "one weight";
    const auto [composed_rows, fused_rows] = composed_and_fused([&] { return grouped::weights_per_row(first, more); });
    expect_same_bytes(fused_rows.data, composed_rows.data, "per row data, " + what);
    expect_same_scales(fused_rows.scale, composed_rows.scale, "per row scale, " + what);
    const auto [composed_columns, fused_columns] =
        composed_and_fused([&] { return grouped::weights_per_column(first, more); });
    expect_same_bytes(fused_columns.data, composed_columns.data, "per column data, " + what);
    expect_same_scales(fused_columns.scale, composed_columns.scale, "per column scale, " + what);
  }
}

}  // namespace
}  // namespace fp8_grouped_cast_test
