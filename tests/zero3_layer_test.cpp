// ZeRO-3 blocks on one process (triax/layers/zero3_layer.hpp): a block run through its unit gives
// the plain block's outputs and, in its shards' gradients, the plain block's parameter gradients
// (flattened), also for a parameter used by two units (a tied head); the whole parameters hold
// no storage outside a block's run; two micro-batches accumulate. Several ranks: the parity
// matrix (parity.*_zero3).
#include "triax/layers/zero3_layer.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

#include <memory>
#include <vector>

#include "triax/error.hpp"
#include "triax/model.hpp"

namespace triax {
namespace {

at::Tensor seeded(std::vector<int64_t> shape, uint64_t seed) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn(shape, generator, at::TensorOptions().dtype(at::kDouble));
}

// Two linear maps whose second one reuses the first's weight transposed, as a tied head does.
struct TwoBlocks : torch::nn::Module {
  TwoBlocks() {
    first = register_module("first", torch::nn::Linear(torch::nn::LinearOptions(4, 3)));
    second = register_module("second", torch::nn::Linear(torch::nn::LinearOptions(3, 3)));
    to(at::kDouble);
    at::NoGradGuard no_grad;
    uint64_t seed = 1;
    for (at::Tensor& p : parameters()) p.copy_(seeded(p.sizes().vec(), seed++));
  }
  at::Tensor block_one(const at::Tensor& x) { return at::tanh(first->forward(x)); }
  // The tied part: the first weight ([3, 4]) maps back to 4 features.
  at::Tensor block_two(const at::Tensor& h) { return at::matmul(second->forward(h), first->weight).pow(2).sum(); }
  torch::nn::Linear first{nullptr}, second{nullptr};
};

TEST(Zero3Layer, MatchesThePlainBlocksAndHoldsNoWholeParameterOutsideThem) {
  const at::Tensor x = seeded({2, 5, 4}, 11);
  auto plain = std::make_shared<TwoBlocks>();
  at::Tensor loss = plain->block_two(plain->block_one(x)) + plain->block_two(plain->block_one(x * 0.5));
  loss.backward();
  std::vector<at::Tensor> expected;
  for (const at::Tensor& p : plain->parameters()) expected.push_back(p.grad().reshape({-1}));

  auto held = std::make_shared<TwoBlocks>();
  TwoBlocks& model = *held;
  std::vector<NamedParameter> table = collect_parameters(model);
  ModelContext context;  // one rank: every shard is its whole parameter
  Zero3Parameters sharded(table, context);
  for (const at::Tensor& p : model.parameters()) EXPECT_EQ(p.numel(), 0) << "a whole parameter outside its block";
  ASSERT_EQ(table.size(), expected.size());
  for (const NamedParameter& p : table) {
    EXPECT_EQ(p.tensor.dim(), 1);
    EXPECT_TRUE(p.spec.flags & TRIAX_PARAM_ZERO3_SHARD);
  }
  auto one = sharded.unit(model.first->parameters());
  auto two = sharded.unit({model.second->weight, model.second->bias, model.first->weight});
  TwoBlocks* raw = &model;
  auto run_one = [raw](const std::vector<at::Tensor>& in) { return std::vector<at::Tensor>{raw->block_one(in[0])}; };
  auto run_two = [raw](const std::vector<at::Tensor>& in) { return std::vector<at::Tensor>{raw->block_two(in[0])}; };
  at::Tensor zero3_loss;
  for (double scale : {1.0, 0.5}) {  // two micro-batches: the shards' gradients accumulate
    const at::Tensor h = zero3_run(one, run_one, {x * scale}, two).front();
    for (const at::Tensor& p : model.parameters()) EXPECT_EQ(p.numel(), 0) << "kept after the forward";
    const at::Tensor micro_loss = zero3_run(two, run_two, {h}, nullptr, one).front();
    micro_loss.backward();
    zero3_loss = zero3_loss.defined() ? zero3_loss + micro_loss.detach() : micro_loss.detach();
  }
  EXPECT_NEAR(zero3_loss.item<double>(), loss.item<double>(), 1e-12);
  for (const at::Tensor& p : model.parameters()) EXPECT_EQ(p.numel(), 0) << "kept after the backward";
  for (size_t k = 0; k < table.size(); ++k) {
    ASSERT_TRUE(table[k].tensor.grad().defined()) << table[k].name;
    EXPECT_TRUE(at::allclose(table[k].tensor.grad(), expected[k], 1e-12, 1e-12)) << table[k].name;
  }
}

TEST(Zero3Layer, RefusesAParameterOutsideTheModel) {
  auto model = std::make_shared<TwoBlocks>();
  std::vector<NamedParameter> table = collect_parameters(*model);
  Zero3Parameters sharded(table, ModelContext{});
  EXPECT_THROW(sharded.unit({at::zeros({2}, at::kDouble)}), Error);
}

}  // namespace
}  // namespace triax
