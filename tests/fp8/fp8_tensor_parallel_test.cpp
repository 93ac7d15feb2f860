// fp8 linears split over a tensor-parallel group as large as the world (1 or 2 ranks under
// mpirun), both tp modes and both recipes, against the whole fp8 layer computed on every rank
// from the same weights: the scales of the sharded operands are all-reduced over tp, so each
// rank quantises its shard to the values the whole tensor gets at tp = 1, and the outputs and
// gradients agree up to fp32 summation order. Were a shard scaled on its own, they would differ
// by fp8 rounding (percents), which the whole layer's distance from the exact product shows.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

#include "tensor_parallel_group.hpp"
#include "triax/layers/fp8_linear.hpp"
#include "triax/layers/linear.hpp"

// A namespace of this file's own: the multi-rank test files compile together (tests/multi_rank.cmake)
// and share names such as kSeq.
namespace fp8_tensor_parallel_test {
namespace {

using triax::Fp8Recipe;
using triax::TensorParallel;
using triax::TpMode;
using triax::testing::assign;
using triax::testing::between_blocks;
using triax::testing::expect_close;
using triax::testing::gathered;
using triax::testing::leaf;
using triax::testing::seeded;
using triax::testing::shard_of;

class Fp8TensorParallelTest : public ::testing::TestWithParam<std::tuple<TpMode, Fp8Recipe>> {
 protected:
  void SetUp() override {
    world_ = triax::testing::world_tensor_parallel(std::get<0>(GetParam()));
    tp_ = world_.tp;
    recipe_ = std::get<1>(GetParam());
    what_ = std::string(tp_.mode == TpMode::ReduceScatter ? "REDUCE_SCATTER " : "ALL_REDUCE ") +
            triax::fp8_recipe_name(recipe_) + " tp " + std::to_string(tp_.size) + ": ";
  }
  // The whole layer in fp8 on this rank alone.
  triax::Fp8LinearPlan whole() const { return {recipe_, TensorParallel(), false, false}; }

  triax::testing::WorldTensorParallel world_;
  TensorParallel tp_;
  Fp8Recipe recipe_ = Fp8Recipe::Tensorwise;
  std::string what_;
};

// Every rank quantises the same values with the same scales: only fp32 summation order differs.
constexpr double kSameQuantisation = 1e-5;
constexpr int64_t kBatch = 2, kSeq = 16, kHidden = 64, kWidth = 96;

// x scaled per row and per feature block, so that each shard of it, and of the weight, has an
// amax of its own.
at::Tensor uneven(std::vector<int64_t> shape, uint64_t seed, double std) {
  at::Tensor t = seeded(shape, seed, at::kFloat, std);
  const at::Tensor ramp = at::linspace(0.2, 3.0, shape.back(), t.options());
  return t * ramp;
}

TEST_P(Fp8TensorParallelTest, ColumnParallelEqualsTheWholeLayer) {
  const at::Tensor w = uneven({kHidden, kWidth}, 1, 0.1).t().contiguous();  // [out, in], uneven over out
  const at::Tensor x = uneven({kBatch, kSeq, kHidden}, 2, 1.0), grad = uneven({kBatch, kSeq, kWidth}, 3, 1.0);

  triax::ColumnParallelLinear layer(triax::LinearOptions{kHidden, kWidth}, tp_);
  assign(layer.weight, shard_of(w, 0, tp_));
  layer.compute_in_fp8(recipe_, "column");
  at::Tensor xl = leaf(between_blocks(x, tp_));
  at::Tensor y = layer.forward(xl);
  y.backward(shard_of(grad, 2, tp_));

  at::Tensor rx = leaf(x), rw = leaf(w);
  at::Tensor ry = triax::fp8_linear(rx, rw, whole());
  ry.backward(grad);
  ASSERT_GT((ry - at::linear(x, w)).abs().max().item<double>() / ry.abs().max().item<double>(), 1e-3)
      << what_ << "the whole fp8 layer is not quantised";

  expect_close(gathered(y, 2, tp_), ry.detach(), what_ + "output", kSameQuantisation);
  expect_close(xl.grad(), between_blocks(rx.grad(), tp_), what_ + "input gradient", kSameQuantisation);
  expect_close(gathered(layer.weight.grad(), 0, tp_), rw.grad(), what_ + "weight gradient", kSameQuantisation);
}

TEST_P(Fp8TensorParallelTest, RowParallelEqualsTheWholeLayer) {
  const at::Tensor w = uneven({kHidden, kWidth}, 4, 0.1);  // [out, in], uneven over in
  const at::Tensor x = uneven({kBatch, kSeq, kWidth}, 5, 1.0), grad = seeded({kBatch, kSeq, kHidden}, 6, at::kFloat);

  triax::RowParallelLinear layer(triax::LinearOptions{kWidth, kHidden}, tp_);
  assign(layer.weight, shard_of(w, 1, tp_));
  layer.compute_in_fp8(recipe_, "row");
  at::Tensor xl = leaf(shard_of(x, 2, tp_));
  at::Tensor y = layer.forward(xl);
  y.backward(between_blocks(grad, tp_));

  at::Tensor rx = leaf(x), rw = leaf(w);
  at::Tensor ry = triax::fp8_linear(rx, rw, whole());
  ry.backward(grad);

  expect_close(y, between_blocks(ry.detach(), tp_), what_ + "output", kSameQuantisation);
  expect_close(xl.grad(), shard_of(rx.grad(), 2, tp_), what_ + "input gradient", kSameQuantisation);
  expect_close(gathered(layer.weight.grad(), 1, tp_), rw.grad(), what_ + "weight gradient", kSameQuantisation);
}

INSTANTIATE_TEST_SUITE_P(ModesAndRecipes, Fp8TensorParallelTest,
                         ::testing::Combine(::testing::Values(TpMode::AllReduce, TpMode::ReduceScatter),
                                            ::testing::Values(Fp8Recipe::Tensorwise, Fp8Recipe::Rowwise)));

}  // namespace
}  // namespace fp8_tensor_parallel_test
