// decode_norm_gemv (decode_norm_gemv.hpp): a decoding step's RMSNorm (with its residual add)
// folded into the GEMV after it, against the two ops it replaces, add_rms_norm (rms_norm) then
// decode_gemv (decode_gate_up_swiglu), and against the fp64 composition (DecodeNormGemvCuda, ctest
// label gpu, skipped without a GPU); where it leaves the work to those ops (DecodeNormGemvCpu).
#include "triax/layers/decode_norm_gemv.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "triax/layers/decode_gemv.hpp"
#include "triax/layers/fused_ops.hpp"

namespace {

// Read once by the library: set before the first call.
const bool kSwitchedOn = setenv("TRIAX_DECODE_NORM_GEMV", "1", 1) == 0;
constexpr double kEps = 1e-5;

at::Tensor seeded(const std::vector<int64_t>& shape, uint64_t seed, c10::ScalarType dtype, c10::Device device) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn(shape, generator, at::TensorOptions().dtype(at::kDouble)).to(device, dtype);
}

TEST(DecodeNormGemvCpu, LeavesCpuTensorsToTheNormAndTheProduct) {
  ASSERT_TRUE(kSwitchedOn);
  const at::Tensor x = at::ones({1, 1, 16}), w = at::ones({8, 16}), norm = at::ones({16});
  const triax::NormedProduct folded = triax::decode_norm_gemv({x, x}, norm, kEps, w, triax::DecodeProduct::Plain);
  EXPECT_FALSE(folded.product.defined());
  EXPECT_FALSE(folded.sum.defined());
}

// The two ops the fold replaces: {sum, product}.
triax::NormedProduct unfolded(const triax::ResidualStream& stream, const at::Tensor& norm, const at::Tensor& w,
                              triax::DecodeProduct kind) {
  const auto [sum, normed] = stream.pending.defined() ? triax::add_rms_norm(stream.residual, stream.pending, norm, kEps)
                                                      : std::pair{stream.residual, triax::rms_norm(stream.residual, norm, kEps)};
  const at::Tensor product = kind == triax::DecodeProduct::GateUpSwiglu ? triax::decode_gate_up_swiglu(normed, w)
                                                                         : triax::decode_gemv(normed, w);
  return {sum, product};
}

// The fp64 composition: rms_norm(x + pending) w^T (then SwiGLU of its halves).
at::Tensor reference(const triax::ResidualStream& stream, const at::Tensor& norm, const at::Tensor& w,
                     triax::DecodeProduct kind) {
  at::Tensor sum = stream.residual.to(at::kDouble);
  if (stream.pending.defined()) sum = sum + stream.pending.to(at::kDouble);
  const at::Tensor normed = sum * at::rsqrt(sum.pow(2).mean(-1, true) + kEps) * norm.to(at::kDouble);
  const at::Tensor product = at::matmul(normed, w.to(at::kDouble).t());
  if (kind == triax::DecodeProduct::Plain) return product;
  const at::Tensor gate = product.narrow(-1, 0, w.size(0) / 2), up = product.narrow(-1, w.size(0) / 2, w.size(0) / 2);
  return gate * at::sigmoid(gate) * up;
}

struct Shape {
  int64_t in, out;
  triax::DecodeProduct kind;
};

TEST(DecodeNormGemvCuda, FollowsTheNormThenTheProduct) {
  ASSERT_TRUE(kSwitchedOn);
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  using triax::DecodeProduct;
  // 1.7b's q/k/v and gate/up (2 x 8192 over 2048), 135m's (hidden 576: 2 x 1536), a small one.
  const std::vector<Shape> shapes{{2048, 6144, DecodeProduct::Plain}, {2048, 2 * 8192, DecodeProduct::GateUpSwiglu},
                                  {576, 960, DecodeProduct::Plain},   {576, 2 * 1536, DecodeProduct::GateUpSwiglu},
                                  {64, 37, DecodeProduct::Plain},     {64, 2 * 40, DecodeProduct::GateUpSwiglu}};
  for (const c10::ScalarType dtype : {at::kBFloat16, at::kFloat})
    for (const Shape& shape : shapes)
      for (const int64_t rows : {1, 2, 4})
        for (const bool add : {true, false}) {
          const at::Tensor x = seeded({rows, 1, shape.in}, 1, dtype, at::kCUDA);
          const at::Tensor pending = add ? seeded({rows, 1, shape.in}, 2, dtype, at::kCUDA) : at::Tensor();
          const at::Tensor norm = seeded({shape.in}, 3, dtype, at::kCUDA);
          const at::Tensor w = seeded({shape.out, shape.in}, 4, dtype, at::kCUDA);
          const std::string what = std::string(c10::toString(dtype)) + " rows " + std::to_string(rows) + " [" +
                                   std::to_string(shape.out) + ", " + std::to_string(shape.in) + "]" +
                                   (add ? " with the add" : "") +
                                   (shape.kind == DecodeProduct::GateUpSwiglu ? " SwiGLU" : "");
          const triax::NormedProduct folded = triax::decode_norm_gemv({x, pending}, norm, kEps, w, shape.kind);
          ASSERT_TRUE(folded.product.defined() && folded.sum.defined()) << what;
          const triax::NormedProduct expected = unfolded({x, pending}, norm, w, shape.kind);
          ASSERT_TRUE(expected.product.defined()) << what;
          ASSERT_EQ(folded.product.sizes(), expected.product.sizes()) << what;
          EXPECT_TRUE(at::equal(folded.sum, expected.sum)) << what;
          // The same roundings in the same order: equal up to the last bit the sum of squares may
          // differ by; both near the fp64 composition.
          const at::Tensor want = reference({x, pending}, norm, w, shape.kind);
          const double scale = want.abs().max().item<double>();
          const double from_unfolded =
              (folded.product.to(at::kDouble) - expected.product.to(at::kDouble)).abs().max().item<double>() / scale;
          const double from_fp64 = (folded.product.to(at::kDouble) - want).abs().max().item<double>() / scale;
          EXPECT_LE(from_unfolded, dtype == at::kFloat ? 1e-6 : 1e-2) << what;
          EXPECT_LE(from_fp64, dtype == at::kFloat ? 1e-5 : 3e-2) << what;
        }
}

TEST(DecodeNormGemvCuda, LeavesLargerBatchesAndGradientsToTheTwoOps) {
  ASSERT_TRUE(kSwitchedOn);
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const at::Tensor norm = seeded({64}, 3, at::kBFloat16, at::kCUDA), w = seeded({16, 64}, 4, at::kBFloat16, at::kCUDA);
  const at::Tensor five = seeded({5, 1, 64}, 1, at::kBFloat16, at::kCUDA);
  EXPECT_FALSE(triax::decode_norm_gemv({five, five}, norm, kEps, w, triax::DecodeProduct::Plain).product.defined());
  const at::Tensor one = seeded({1, 1, 64}, 1, at::kBFloat16, at::kCUDA);
  EXPECT_FALSE(triax::decode_norm_gemv({one, one}, norm, kEps, w.clone().requires_grad_(true), triax::DecodeProduct::Plain)
                   .product.defined());
  EXPECT_FALSE(triax::decode_norm_gemv({one, one}, norm, kEps, w.narrow(0, 0, 15), triax::DecodeProduct::GateUpSwiglu)
                   .product.defined())
      << "an odd number of gate/up rows";
}

}  // namespace
