// decode_gemv_by_expert and decode_swiglu_by_expert (decode_experts.hpp): each row through its own
// expert's matrices. Against the product of each row with its expert's matrix in fp64 on CPU and
// CUDA (DecodeExpertsCpu; DecodeExpertsCuda, ctest label gpu, skipped without a GPU), at moe-1b's
// shapes on CUDA; the SwiGLU kernel with the bits of its two products then swiglu; bad operands
// refused by name.
#include "triax/layers/decode_experts.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "triax/error.hpp"
#include "triax/layers/fused_ops.hpp"

namespace {

at::Tensor seeded(const std::vector<int64_t>& shape, uint64_t seed, c10::ScalarType dtype, c10::Device device) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn(shape, generator, at::TensorOptions().dtype(at::kDouble)).to(device, dtype);
}

// Row r of x times stack[experts[r]] transposed, one row at a time in fp64.
at::Tensor row_by_row(const at::Tensor& x, const at::Tensor& stack, const std::vector<int64_t>& experts) {
  std::vector<at::Tensor> rows;
  for (size_t r = 0; r < experts.size(); ++r)
    rows.push_back(at::matmul(x[static_cast<int64_t>(r)].to(at::kDouble), stack[experts[r]].to(at::kDouble).t()));
  return at::stack(rows).cpu();
}

double relative_error(const at::Tensor& got, const at::Tensor& want) {
  return (got.cpu().to(at::kDouble) - want).abs().max().item<double>() / want.abs().max().item<double>();
}

TEST(DecodeExpertsCpu, EachRowThroughItsOwnExpert) {
  const std::vector<int64_t> chosen{2, 0, 2, 3, 1};  // a repeated expert, every one of four used
  const at::Tensor x = seeded({5, 24}, 1, at::kDouble, at::kCPU), stack = seeded({4, 16, 24}, 2, at::kDouble, at::kCPU);
  const at::Tensor experts = at::tensor(chosen, at::kLong);
  EXPECT_LE(relative_error(triax::decode_gemv_by_expert(x, stack, experts), row_by_row(x, stack, chosen)), 1e-12);
  const at::Tensor up = seeded({4, 16, 24}, 3, at::kDouble, at::kCPU);
  const at::Tensor activated = triax::decode_swiglu_by_expert(x, stack, up, experts);
  const at::Tensor gate_rows = row_by_row(x, stack, chosen), up_rows = row_by_row(x, up, chosen);
  EXPECT_LE(relative_error(activated, at::silu(gate_rows) * up_rows), 1e-12);
}

TEST(DecodeExpertsCpu, RefusesOperandsOfOtherShapes) {
  const at::Tensor x = at::ones({2, 8}), stack = at::ones({3, 4, 8});
  EXPECT_THROW(triax::decode_gemv_by_expert(x, stack, at::zeros({3}, at::kLong)), triax::Error);
  EXPECT_THROW(triax::decode_gemv_by_expert(x, stack, at::zeros({2}, at::kInt)), triax::Error);
  EXPECT_THROW(triax::decode_gemv_by_expert(at::ones({2, 6}), stack, at::zeros({2}, at::kLong)), triax::Error);
}

TEST(DecodeExpertsCuda, FollowsTheFp64ProductAtMoe1bShapes) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  // moe-1b's experts: 8 of [2048 intermediate, 1024 hidden]; 1 and 2 tokens of top-2 (and 8 rows).
  for (const c10::ScalarType dtype : {at::kBFloat16, at::kFloat})
    for (const std::vector<int64_t>& chosen :
         std::vector<std::vector<int64_t>>{{5, 1}, {0, 7, 3, 0}, {0, 1, 2, 3, 4, 5, 6, 7}}) {
      const int64_t m = static_cast<int64_t>(chosen.size());
      const std::string what = std::string(c10::toString(dtype)) + " rows " + std::to_string(m);
      const at::Tensor experts = at::tensor(chosen, at::kLong).to(at::kCUDA);
      const at::Tensor x = seeded({m, 1024}, 1, dtype, at::kCUDA), h = seeded({m, 2048}, 2, dtype, at::kCUDA);
      const at::Tensor gate = seeded({8, 2048, 1024}, 3, dtype, at::kCUDA),
                       up = seeded({8, 2048, 1024}, 4, dtype, at::kCUDA);
      const at::Tensor down = seeded({8, 1024, 2048}, 5, dtype, at::kCUDA);
      const double tolerance = dtype == at::kFloat ? 1e-5 : 1e-2;
      EXPECT_LE(relative_error(triax::decode_gemv_by_expert(x, gate, experts), row_by_row(x, gate, chosen)), tolerance)
          << what;
      EXPECT_LE(relative_error(triax::decode_gemv_by_expert(h, down, experts), row_by_row(h, down, chosen)), tolerance)
          << what;
      const at::Tensor activated = triax::decode_swiglu_by_expert(x, gate, up, experts);
      const at::Tensor two_products =
          triax::swiglu(triax::decode_gemv_by_expert(x, gate, experts), triax::decode_gemv_by_expert(x, up, experts));
      EXPECT_TRUE(at::equal(activated, two_products)) << what;
    }
}

TEST(DecodeExpertsCuda, AnIndexOutOfRangeGivesZeros) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const at::Tensor x = seeded({2, 64}, 1, at::kBFloat16, at::kCUDA),
                   stack = seeded({3, 32, 64}, 2, at::kBFloat16, at::kCUDA);
  const at::Tensor y =
      triax::decode_gemv_by_expert(x, stack, at::tensor(std::vector<int64_t>{1, 3}, at::kLong).to(at::kCUDA));
  EXPECT_TRUE(at::equal(y[1], at::zeros({32}, y.options())));
  EXPECT_FALSE(at::equal(y[0], at::zeros({32}, y.options())));
}

}  // namespace
