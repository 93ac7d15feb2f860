// Side outputs (triax/layers/side_outputs.hpp): a value a module sets beside its output keeps its
// gradient when the block runs through recompute() or a ZeRO-3 unit, whose first forward runs
// without autograd: the loss with the side value added gives the plain block's gradients.
#include "triax/layers/side_outputs.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

#include <memory>
#include <vector>

#include "triax/error.hpp"
#include "triax/layers/recompute.hpp"
#include "triax/layers/zero3_layer.hpp"
#include "triax/model.hpp"

namespace triax {
namespace {

// A linear map that, like a router, sets a differentiable penalty and a detached statistic.
struct PenalisedLinear : torch::nn::Module {
  PenalisedLinear() {
    linear = register_module("linear", torch::nn::Linear(torch::nn::LinearOptions(4, 3)));
    to(at::kDouble);
    at::NoGradGuard no_grad;
    at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(7);
    for (at::Tensor& p : parameters()) p.copy_(at::randn(p.sizes(), generator, p.options()));
  }
  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor y = at::tanh(linear->forward(x));
    if (SideOutput::wanted()) penalty.set({y.pow(2).mean() * 0.3, y.abs().max().detach()});
    return y;
  }
  torch::nn::Linear linear{nullptr};
  SideOutput penalty;
};

at::Tensor input() {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(3);
  return at::randn({2, 5, 4}, generator, at::TensorOptions().dtype(at::kDouble));
}

// The objective of one forward: the output's sum plus the penalty; its gradients, flattened.
struct Result {
  double loss = 0, statistic = 0;
  std::vector<at::Tensor> grads;
};

Result objective(PenalisedLinear& module, const at::Tensor& y, const std::vector<at::Tensor>& parameters) {
  std::optional<std::vector<at::Tensor>> side = module.penalty.take();
  EXPECT_TRUE(side.has_value());
  EXPECT_FALSE(module.penalty.take().has_value()) << "handed over twice";
  if (!side) return {};
  EXPECT_TRUE((*side)[0].requires_grad()) << "the penalty lost its graph";
  const at::Tensor loss = y.sum() + (*side)[0];
  loss.backward();
  Result result{loss.item<double>(), (*side)[1].item<double>(), {}};
  for (const at::Tensor& p : parameters) result.grads.push_back(p.grad().reshape({-1}).clone());
  return result;
}

void expect_same(const Result& got, const Result& expected) {
  EXPECT_NEAR(got.loss, expected.loss, 1e-12);
  EXPECT_NEAR(got.statistic, expected.statistic, 1e-12);
  ASSERT_EQ(got.grads.size(), expected.grads.size());
  for (size_t k = 0; k < got.grads.size(); ++k) EXPECT_TRUE(at::allclose(got.grads[k], expected.grads[k], 1e-12, 1e-12));
}

Result plain_run() {
  PenalisedLinear module;
  return objective(module, module.forward(input()), module.parameters());
}

TEST(SideOutputs, KeepTheirGradientThroughRecompute) {
  PenalisedLinear module;
  PenalisedLinear* raw = &module;
  const at::Tensor y = recompute([raw](const std::vector<at::Tensor>& in) { return raw->forward(in[0]); },
                                 {input()}, module.parameters());
  expect_same(objective(module, y, module.parameters()), plain_run());
  EXPECT_FALSE(module.penalty.take().has_value()) << "the backward's re-run left its values behind";
}

TEST(SideOutputs, KeepTheirGradientThroughAZero3Unit) {
  auto held = std::make_shared<PenalisedLinear>();  // collect_parameters walks a shared module
  PenalisedLinear& module = *held;
  std::vector<NamedParameter> table = collect_parameters(module);
  ModelContext context;  // one rank: each shard is its whole parameter
  Zero3Parameters sharded(table, context);
  PenalisedLinear* raw = &module;
  const at::Tensor y =
      zero3_run(sharded.unit(module.parameters()),
                [raw](const std::vector<at::Tensor>& in) { return std::vector<at::Tensor>{raw->forward(in[0])}; },
                {input()})
          .front();
  std::vector<at::Tensor> shards;
  for (const NamedParameter& p : table) shards.push_back(p.tensor);
  expect_same(objective(module, y, shards), plain_run());
}

TEST(SideOutputs, AreNotWantedWithoutAutogradOrACarrier) {
  at::NoGradGuard no_grad;
  EXPECT_FALSE(SideOutput::wanted());
  PenalisedLinear module;
  module.forward(input());
  EXPECT_FALSE(module.penalty.take().has_value());
}

TEST(SideOutputs, ABlockThatSetsOtherValuesWhenRunAgainIsRefused) {
  SideOutput side;
  int runs = 0;
  const at::Tensor x = input().requires_grad_();
  const at::Tensor y = recompute(
      [&](const std::vector<at::Tensor>& in) {
        if (runs++ == 0) side.set({in[0].sum()});
        return in[0] * 2;
      },
      {x}, {});
  ASSERT_TRUE(side.take().has_value());
  EXPECT_THROW(y.sum().backward(), std::exception);
}

}  // namespace
}  // namespace triax
