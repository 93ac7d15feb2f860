// The fp8 scaling kernels (sdk/src/kernels/fp8_amax.cu, fp8_cast.cu) against the LibTorch
// composition they replace, bit for bit, on the GPU (ctest label gpu, skipped without one): the
// tensorwise scale of a whole tensor in one launch, and the fp8 bytes in both layouts from one
// read, on the vectorised tiles (sides in multiples of 16 and 8, whole and partial tiles) and on
// the plain kernel for other shapes, for bf16 and fp32 inputs, both formats, and tensorwise,
// per-row and per-column multipliers; the rowwise recipe's e4m3 casts in one layout, amax and
// cast in one kernel (fp8_grouped_cast.cu). Their outputs lie where cuBLASLt reads them (16-byte
// aligned; on the CPU too), and at::_scaled_mm takes them.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <limits>
#include <string>
#include <vector>

#include "fp8_matmul.hpp"
#include "triax/error.hpp"

namespace {

using triax::fp8::Fp8Matrix;
using triax::fp8::Layout;
using triax::fp8::Scaling;

constexpr c10::ScalarType kE4m3 = c10::ScalarType::Float8_e4m3fn;
constexpr c10::ScalarType kE5m2 = c10::ScalarType::Float8_e5m2;

class Fp8CastCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  }
};

// What quantise computed before its kernels: the amax by LibTorch's reduction, the scale and
// multiplier by its elementwise ops, the bytes by its cast, the transpose by a copy.
Fp8Matrix composition(const at::Tensor& t, const Scaling& scaling) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<int64_t> dims =
      scaling.amax_dim < 0 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{scaling.amax_dim};
  at::Tensor amax = at::linalg_vector_norm(t, inf, dims, /*keepdim=*/true).to(at::kFloat).clamp_min(1e-12);
  const double largest = scaling.format == kE5m2 ? 57344.0 : 448.0;
  Fp8Matrix m;
  m.scale = amax / largest;
  m.data = at::empty(t.sizes(), t.options().dtype(scaling.format));
  at::mul_out(m.data, t, amax.reciprocal() * largest);
  m.transposed = m.data.t().contiguous();
  return m;
}

// Equal bytes (NaN scales included).
bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && at::equal(a.contiguous().view(at::kByte), b.contiguous().view(at::kByte));
}

// The layout at::_scaled_mm hands to cuBLASLt as it is: contiguous fp8 bytes and fp32 scales,
// each at a 16-byte aligned address (a scale viewed at another offset of a shared buffer fails
// the product with CUBLAS_STATUS_NOT_SUPPORTED).
void expect_cublaslt_layout(const Fp8Matrix& m, const std::string& what) {
  EXPECT_EQ(m.scale.scalar_type(), at::kFloat) << what;
  for (const at::Tensor* t : {&m.data, &m.scale, &m.transposed}) {
    EXPECT_TRUE(t->is_contiguous()) << what;
    EXPECT_TRUE(triax::fp8::aligned_for_cublaslt(*t)) << what;
  }
}

void expect_kernels_equal_composition(const at::Tensor& t, const Scaling& scaling, const std::string& what) {
  const Fp8Matrix kernel = triax::fp8::quantise(t, scaling, triax::TensorParallel(), Layout::Both);
  expect_cublaslt_layout(kernel, what);
  const Fp8Matrix expected = composition(t, scaling);
  EXPECT_TRUE(same_bits(kernel.scale, expected.scale)) << what << ": scale";
  EXPECT_TRUE(same_bits(kernel.data, expected.data)) << what << ": row-major bytes";
  EXPECT_TRUE(same_bits(kernel.transposed, expected.transposed)) << what << ": transposed bytes";
  // The rowwise recipe's single layouts: per row, row-major; per column, transposed (e4m3: one
  // kernel for the amax and the cast, fp8_grouped_cast.cu).
  const Fp8Matrix row_major = triax::fp8::quantise(t, scaling, triax::TensorParallel(), Layout::RowMajor);
  EXPECT_TRUE(same_bits(row_major.data, expected.data)) << what << ": row-major only";
  EXPECT_TRUE(same_bits(row_major.scale, expected.scale)) << what << ": row-major only, scale";
  const Fp8Matrix transposed = triax::fp8::quantise(t, scaling, triax::TensorParallel(), Layout::Transposed);
  expect_cublaslt_layout({transposed.transposed, transposed.scale, transposed.transposed}, what);
  EXPECT_TRUE(same_bits(transposed.transposed, expected.transposed)) << what << ": transposed only";
  EXPECT_TRUE(same_bits(transposed.scale, expected.scale)) << what << ": transposed only, scale";
}

TEST_F(Fp8CastCuda, TheKernelsEqualTheLibTorchCompositionBitForBit) {
  // [rows, cols]: whole tiles; partial tiles; a [16384, 2048] activation of 1.7b; rows not a
  // multiple of 16 and columns not of 8 (the plain kernel).
  const std::vector<std::vector<int64_t>> shapes = {{256, 128}, {144, 72}, {16384, 2048}, {200, 96}, {64, 100}};
  for (const auto& shape : shapes) {
    for (const c10::ScalarType dtype : {at::kBFloat16, at::kFloat}) {
      at::manual_seed(shape[0] * 7 + shape[1]);
      const at::Tensor t = (at::randn(shape, at::kFloat) * 3).to(at::TensorOptions().device(at::kCUDA).dtype(dtype));
      for (const c10::ScalarType format : {kE4m3, kE5m2})
        for (const int64_t amax_dim : {-1, 0, 1}) {
          const std::string what = "[" + std::to_string(shape[0]) + ", " + std::to_string(shape[1]) + "] " +
                                   c10::toString(dtype) + " -> " + c10::toString(format) + ", amax over " +
                                   std::to_string(amax_dim);
          expect_kernels_equal_composition(t, Scaling{format, amax_dim, false}, what);
        }
    }
  }
}

TEST_F(Fp8CastCuda, ZerosAndNaNScaleAsTheComposition) {
  const auto cuda_bf16 = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  expect_kernels_equal_composition(at::zeros({128, 64}, cuda_bf16), Scaling{kE4m3, -1, false}, "zeros");
  at::Tensor with_nan = at::randn({128, 64}, cuda_bf16);
  with_nan[5][7] = std::numeric_limits<float>::quiet_NaN();
  const Fp8Matrix kernel = triax::fp8::quantise(with_nan, Scaling{kE4m3, -1, false}, triax::TensorParallel());
  EXPECT_TRUE(at::isnan(kernel.scale).all().item<bool>());
}

// The scales of the one-launch kernel enter the product as they are; a scale off the 16-byte
// grid is refused by triax before cuBLASLt would refuse it.
TEST_F(Fp8CastCuda, TheKernelsScalesEnterTheScaledProduct) {
  const auto cuda_bf16 = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  at::manual_seed(3);
  const Scaling tensorwise{kE4m3, -1, false};
  const Fp8Matrix x = triax::fp8::quantise(at::randn({64, 128}, cuda_bf16), tensorwise, triax::TensorParallel());
  const Fp8Matrix w = triax::fp8::quantise(at::randn({96, 128}, cuda_bf16), tensorwise, triax::TensorParallel());
  EXPECT_NO_THROW(triax::fp8::scaled_matmul(x.data, x.scale, w.data.t(), w.scale.t(), at::kBFloat16, true));
  const at::Tensor buffer = at::zeros({8}, cuda_bf16.dtype(at::kFloat));
  const at::Tensor misaligned = buffer.narrow(0, 2, 1).view({1, 1}).copy_(x.scale);
  EXPECT_THROW(triax::fp8::scaled_matmul(x.data, misaligned, w.data.t(), w.scale.t(), at::kBFloat16, true),
               triax::Error);
}

TEST(Fp8CastCpu, AlignmentForCublasLtIsThatOfTheViewsAddress) {
  const at::Tensor buffer = at::zeros({8}, at::kFloat);  // LibTorch aligns CPU allocations to 64 bytes
  EXPECT_TRUE(triax::fp8::aligned_for_cublaslt(buffer.narrow(0, 0, 1).view({1, 1})));
  EXPECT_FALSE(triax::fp8::aligned_for_cublaslt(buffer.narrow(0, 2, 1).view({1, 1})));
  EXPECT_TRUE(triax::fp8::aligned_for_cublaslt(buffer.narrow(0, 4, 1).view({1, 1})));
  at::manual_seed(4);
  const at::Tensor t = at::randn({48, 32}, at::kFloat);
  for (const int64_t amax_dim : {-1, 0, 1})
    expect_cublaslt_layout(
        triax::fp8::quantise(t, Scaling{kE4m3, amax_dim, false}, triax::TensorParallel(), Layout::Both),
        "cpu, amax over " + std::to_string(amax_dim));
}

}  // namespace
