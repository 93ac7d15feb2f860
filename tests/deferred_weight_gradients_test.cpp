// The backward split into B and W in the SDK's layers (triax/layers/deferred_weight_gradients.hpp):
// with a WeightGradientDeferral alive during the forward, each linear layer's backward computes
// the input's gradient (and the bias's) and leaves the weight's to the queue; running the queue
// accumulates exactly the gradient the whole backward computes, through the weight's hooks. For
// column- and row-parallel layers in every weight layout, a channel-major input, the activation
// recomputed in backward, fp8 (CPU emulation, both recipes) and a recomputed block; without a
// deferral nothing is queued.
#include "triax/layers/deferred_weight_gradients.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/function_hook.h>

#include <functional>
#include <memory>
#include <string>

#include "triax/error.hpp"
#include "triax/layers/linear.hpp"
#include "triax/layers/recompute.hpp"
#include "triax/weight_gradient_queue.hpp"

// A namespace of this file's own: the SDK's test files compile together (tests/sdk_test.cmake) and
// share names such as seeded.
namespace triax::deferred_weight_gradients_test {
namespace {

at::Tensor seeded(std::vector<int64_t> shape, uint64_t seed) {
  at::manual_seed(seed);
  return at::randn(shape, at::kFloat) * 0.3;
}

void fill(SpecifiedModule& module, uint64_t seed) {
  const at::NoGradGuard no_grad;
  for (at::Tensor& p : module.parameters()) p.copy_(seeded(p.sizes().vec(), seed++));
}

struct Gradients {
  at::Tensor input;
  std::vector<at::Tensor> parameters;
};

Gradients gradients_of(const at::Tensor& x, torch::nn::Module& module) {
  Gradients g{x.grad().defined() ? x.grad().clone() : at::Tensor(), {}};
  for (const at::Tensor& p : module.parameters())
    g.parameters.push_back(p.grad().defined() ? p.grad().clone() : p.grad());
  return g;
}

void zero(const at::Tensor& x, torch::nn::Module& module) {
  x.mutable_grad() = at::Tensor();
  for (at::Tensor& p : module.parameters()) p.mutable_grad() = at::Tensor();
}

// forward(x)·r summed, backpropagated whole, then split (B, then W from the queue): both must
// give the same gradients bit for bit, and B alone none of `weight`'s. `what` names the case.
void expect_split_equals_whole(torch::nn::Module& module, const at::Tensor& weight,
                               const std::function<at::Tensor(const at::Tensor&)>& forward, const at::Tensor& input,
                               const std::string& what) {
  const at::Tensor x = input.detach().requires_grad_(true);
  zero(x, module);
  const at::Tensor y_whole = forward(x);
  const at::Tensor r = seeded(y_whole.sizes().vec(), 99);
  (y_whole * r).sum().backward();
  const Gradients whole = gradients_of(x, module);
  zero(x, module);

  WeightGradientQueue queue;
  at::Tensor y;
  {
    const WeightGradientDeferral deferral(queue.c_queue());
    y = forward(x);
  }
  // A bias is added after the product rather than inside it (at::linear's addmm): the same values
  // up to rounding; the gradients do not depend on them.
  EXPECT_TRUE(at::allclose(y, y_whole, 1e-6, 1e-7)) << what << ": the forward changed";
  (y * r).sum().backward();
  EXPECT_GT(queue.size(), 0u) << what << ": nothing deferred";
  EXPECT_TRUE(at::equal(x.grad(), whole.input)) << what << ": input gradient";
  EXPECT_FALSE(weight.grad().defined()) << what << ": the weight's gradient in B";
  EXPECT_GT(queue.run(), 0u);
  EXPECT_EQ(queue.size(), 0u);
  const Gradients split = gradients_of(x, module);
  for (size_t k = 0; k < split.parameters.size(); ++k) {
    ASSERT_TRUE(split.parameters[k].defined()) << what << ": parameter " << k << " got no gradient";
    EXPECT_TRUE(at::equal(split.parameters[k], whole.parameters[k])) << what << ": parameter " << k;
  }
}

TEST(DeferredWeightGradients, ColumnAndRowParallelLayersInEveryLayout) {
  const at::Tensor x = seeded({2, 5, 8}, 1);
  LinearOptions options{8, 6};
  options.bias = true;
  ColumnParallelLinear column(options, TensorParallel{});
  fill(column, 10);
  expect_split_equals_whole(
      column, column.weight, [&](const at::Tensor& in) { return column.forward(in); }, x, "column, bias");
  ColumnParallelLinear fused(options.conv1d(3), TensorParallel{});  // [in, 3, out], Conv1D
  fill(fused, 20);
  expect_split_equals_whole(
      fused, fused.weight, [&](const at::Tensor& in) { return fused.forward(in); }, x, "column, conv1d parts");
  LinearOptions grouped{8, 6};
  grouped.groups = 2;
  grouped.widest_part = 4;
  ColumnParallelLinear blocks(grouped, TensorParallel{});
  fill(blocks, 30);
  expect_split_equals_whole(
      blocks, blocks.weight, [&](const at::Tensor& in) { return blocks.forward(in); }, x, "column, groups");
  RowParallelLinear row(LinearOptions{8, 4}, TensorParallel{});
  fill(row, 40);
  expect_split_equals_whole(
      row, row.weight, [&](const at::Tensor& in) { return row.forward(in); }, x, "row");
  expect_split_equals_whole(
      row, row.weight, [&](const at::Tensor& in) { return row.forward_channel_major(in); },
      x.transpose(1, 2).contiguous(), "row, channel-major input");
  RowParallelLinear row_conv1d(LinearOptions{8, 4}.conv1d(), TensorParallel{});
  fill(row_conv1d, 50);
  expect_split_equals_whole(
      row_conv1d, row_conv1d.weight, [&](const at::Tensor& in) { return row_conv1d.forward(in); }, x, "row, conv1d");
}

TEST(DeferredWeightGradients, RecomputedActivationRunsAgainInW) {
  RowParallelLinear down(LinearOptions{8, 4}, TensorParallel{});
  fill(down, 60);
  expect_split_equals_whole(
      down, down.weight,
      [&](const at::Tensor& in) { return down.forward_activated(RecomputedActivation::SwigluHalves, in, true); },
      seeded({2, 5, 16}, 2), "swiglu, recomputed");
  expect_split_equals_whole(
      down, down.weight,
      [&](const at::Tensor& in) { return down.forward_activated(RecomputedActivation::GeluTanh, in, true); },
      seeded({2, 5, 8}, 3), "gelu, recomputed");
}

TEST(DeferredWeightGradients, Fp8ProductsOnTheCpu) {
  for (const Fp8Recipe recipe : {Fp8Recipe::Tensorwise, Fp8Recipe::Rowwise}) {
    ColumnParallelLinear column(LinearOptions{32, 16}, TensorParallel{});
    fill(column, 70);
    column.compute_in_fp8(recipe, "column");
    expect_split_equals_whole(
        column, column.weight, [&](const at::Tensor& in) { return column.forward(in); }, seeded({2, 8, 32}, 4),
        std::string("fp8 ") + fp8_recipe_name(recipe));
  }
}

TEST(DeferredWeightGradients, ARecomputedBlockDefersWhenItRunsAgain) {
  ColumnParallelLinear column(LinearOptions{8, 8}, TensorParallel{});
  fill(column, 80);
  auto block = [&](const std::vector<at::Tensor>& in) { return at::tanh(column.forward(in[0])); };
  expect_split_equals_whole(
      column, column.weight, [&](const at::Tensor& in) { return recompute(block, {in}, {column.weight}); },
      seeded({2, 5, 8}, 5), "recompute");
}

TEST(DeferredWeightGradients, TheWeightsHooksRunInW) {
  ColumnParallelLinear column(LinearOptions{8, 6}, TensorParallel{});
  fill(column, 90);
  int fired = 0;
  struct Count : torch::autograd::PostAccumulateGradHook {
    explicit Count(int& n) : n_(n) {}
    void operator()(const at::Tensor&) override { ++n_; }
    int& n_;
  };
  torch::autograd::impl::set_post_acc_grad_hooks(column.weight, std::make_unique<Count>(fired));
  WeightGradientQueue queue;
  const at::Tensor x = seeded({2, 5, 8}, 6).requires_grad_(true);
  at::Tensor y;
  {
    const WeightGradientDeferral deferral(queue.c_queue());
    y = column.forward(x);
  }
  y.sum().backward();
  EXPECT_EQ(fired, 0);
  queue.run();
  EXPECT_EQ(fired, 1);
  torch::autograd::impl::set_post_acc_grad_hooks(column.weight, nullptr);
}

TEST(DeferredWeightGradients, NothingIsDeferredWithoutADeferralOrAGraph) {
  ColumnParallelLinear column(LinearOptions{8, 6}, TensorParallel{});
  fill(column, 100);
  const at::Tensor x = seeded({2, 5, 8}, 7);
  WeightGradientQueue queue;
  const WeightGradientDeferral deferral(queue.c_queue());
  EXPECT_EQ(weight_gradient_queue_for(x, column.weight), nullptr);  // the input needs no gradient
  {
    const at::NoGradGuard no_grad;
    EXPECT_EQ(weight_gradient_queue_for(x.requires_grad_(true), column.weight), nullptr);
  }
  {
    const WeightGradientDeferral off(nullptr);
    column.forward(x).sum().backward();
  }
  EXPECT_EQ(queue.size(), 0u);
  EXPECT_TRUE(column.weight.grad().defined());
}

TEST(DeferredWeightGradients, AFailingProductIsReportedAndTheRestReleased) {
  WeightGradientQueue queue;
  int ran = 0;
  defer_weight_gradient(*queue.c_queue(), [] { throw Error("broken product"); });
  defer_weight_gradient(*queue.c_queue(), [&ran] { ++ran; });
  try {
    queue.run();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("broken product"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ran, 0);
  EXPECT_EQ(queue.size(), 0u);
}

}  // namespace
}  // namespace triax::deferred_weight_gradients_test
