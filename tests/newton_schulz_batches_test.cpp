// Many matrices through the Newton–Schulz iteration in batches: one iteration shape per batch (a
// tall matrix beside the wide ones of its transposed shape), the byte cap kept, and each matrix's
// result the one it gets alone.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "newton_schulz_batches.hpp"

namespace triax::plugins {
namespace {

using Shapes = std::vector<std::vector<int64_t>>;

int64_t iteration_rows(const std::vector<int64_t>& shape) { return std::min(shape[1], shape[2]); }
int64_t iteration_cols(const std::vector<int64_t>& shape) { return std::max(shape[1], shape[2]); }

TEST(NewtonSchulzBatches, OneIterationShapePerBatchWithinTheCap) {
  // fp32: an 8 x 16 matrix is 512 bytes; the cap holds three of them.
  const Shapes shapes = {{1, 8, 16}, {2, 16, 8}, {1, 8, 8}, {1, 8, 16}, {3, 8, 16}, {1, 8, 8}};
  const std::vector<std::vector<size_t>> batches = newton_schulz_batches(shapes, 4, 3 * 512);
  const std::vector<std::vector<size_t>> expected = {{2, 5}, {0, 1}, {3}, {4}};
  EXPECT_EQ(batches, expected);
  std::set<size_t> seen;
  for (const std::vector<size_t>& batch : batches) {
    int64_t bytes = 0;
    for (size_t i : batch) {
      EXPECT_TRUE(seen.insert(i).second);
      EXPECT_EQ(iteration_rows(shapes[i]), iteration_rows(shapes[batch.front()]));
      EXPECT_EQ(iteration_cols(shapes[i]), iteration_cols(shapes[batch.front()]));
      bytes += shapes[i][0] * shapes[i][1] * shapes[i][2] * 4;
    }
    EXPECT_LE(bytes, 3 * 512);
  }
  EXPECT_EQ(seen.size(), shapes.size());
}

TEST(NewtonSchulzBatches, AnEntryLargerThanTheCapIsABatchOfItsOwn) {
  const Shapes shapes = {{1, 4, 4}, {4, 4, 4}, {1, 4, 4}};
  const std::vector<std::vector<size_t>> expected = {{0}, {1}, {2}};
  EXPECT_EQ(newton_schulz_batches(shapes, 2, 3 * 32), expected);
  const std::vector<std::vector<size_t>> together = {{0, 1, 2}};
  EXPECT_EQ(newton_schulz_batches(shapes, 2, kMaxBatchBytes), together);
}

TEST(NewtonSchulzBatches, EachMatrixGetsItsResultAlone) {
  at::manual_seed(7);
  std::vector<at::Tensor> matrices = {at::randn({2, 12, 20}), at::randn({1, 20, 12}), at::randn({3, 12, 12}),
                                      at::randn({1, 12, 20}), at::zeros({1, 20, 12}), at::randn({2, 20, 12})};
  const NewtonSchulzCoefficients& quintic = *find_newton_schulz_coefficients("quintic");
  // A cap of four 12 x 20 fp32 matrices: the 12 x 20 and 20 x 12 ones take two batches.
  const std::vector<at::Tensor> batched = orthogonalise_all(matrices, quintic, 5, at::kFloat, 4 * 12 * 20 * 4);
  ASSERT_EQ(batched.size(), matrices.size());
  for (size_t i = 0; i < matrices.size(); ++i) {
    const at::Tensor alone = orthogonalise(matrices[i], quintic, 5, at::kFloat);
    EXPECT_EQ(batched[i].sizes(), matrices[i].sizes());
    EXPECT_EQ(batched[i].scalar_type(), at::kFloat);
    // Equal up to the order of the fp32 sum in a tall matrix's norm (over its transposed view
    // alone, over the stacked wide copy in a batch), a rounding of the last bit.
    EXPECT_TRUE(at::allclose(batched[i], alone, 1e-6, 1e-6)) << "matrix " << i;
  }
  EXPECT_EQ(batched[4].abs().max().item<float>(), 0.0f);
}

}  // namespace
}  // namespace triax::plugins
