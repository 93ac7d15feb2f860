// How a step's gradients reach the optimizer (ABI 1.8): with one micro-batch and nothing summed
// after the backward, the backward's low-precision gradients go over as they are, with the
// clipping coefficient beside them, instead of through fp32 buffers clipped in place. Every check
// here is that the new path gives the old one's bits: the norm, each optimizer's update, a plugin
// of ABI 1.7 (the host converts and clips for it) and whole runs.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdio>
#include <tuple>

#include "test_plugin_registry.hpp"
#include "training_test_support.hpp"
#include "triax/parallel/data_parallel_gradients.hpp"
#include "gradients/gradient_accumulator.hpp"
#include "triax/parallel/gradient_norm.hpp"
#include "triax/core/plugins/plugin_instances.hpp"
#include "triax/core/plugins/plugin_registry.hpp"
#include "triax/error.hpp"
#include "triax/tensor_handle.hpp"

namespace triax {
namespace {

TEST(GradientHandoff, AsComputedOnlyWhenNothingIsSummedAfterTheBackward) {
  const GradientHandoffInputs base{true, 1, false, true};
  EXPECT_EQ(choose_gradient_handoff(base), GradientHandoff::kAsComputed);
  auto with = [&](auto change) {
    GradientHandoffInputs in = base;
    change(in);
    return choose_gradient_handoff(in);
  };
  EXPECT_EQ(with([](auto& in) { in.accumulate_grad_in_fp32 = false; }), GradientHandoff::kFp32);
  EXPECT_EQ(with([](auto& in) { in.micro_batches = 2; }), GradientHandoff::kFp32);
  EXPECT_EQ(with([](auto& in) { in.tied_across_stages = true; }), GradientHandoff::kFp32);
  EXPECT_EQ(with([](auto& in) { in.optimizer_takes_scaled_gradients = false; }), GradientHandoff::kFp32);
}

std::vector<NamedParameter> bf16_parameters() {
  std::vector<NamedParameter> params;
  for (int i = 0; i < 3; ++i) {
    at::Tensor t = at::randn({5, 7}).to(at::kBFloat16).requires_grad_(true);
    params.push_back({"p" + std::to_string(i), t, ParameterSpec::sharded({5, 7}, 0, 0)});
  }
  return params;
}

TEST(GradientAccumulator, AsComputedHandsOverTheBackwardsOwnGradient) {
  auto params = bf16_parameters();
  GradientAccumulator acc(params, /*accumulate_in_fp32=*/true, GradientHandoff::kAsComputed);
  EXPECT_FALSE(acc.uses_fp32_buffers());
  acc.zero();
  (params[0].tensor.to(at::kFloat).pow(2).sum() + params[1].tensor.to(at::kFloat).sum()).backward();
  acc.after_backward();
  const auto& grads = acc.gradients();
  EXPECT_TRUE(grads[0].is_same(params[0].tensor.grad()));  // no copy
  EXPECT_EQ(grads[1].scalar_type(), at::kBFloat16);
  EXPECT_EQ(grads[2].scalar_type(), at::kBFloat16);  // no gradient: zeros in the parameter's dtype
  EXPECT_EQ(grads[2].abs().sum().item<double>(), 0.0);
  // A second micro-batch would be summed in bf16: refused, naming the parameter.
  params[0].tensor.sum().backward();
  try {
    acc.after_backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'p0'"), std::string::npos) << e.what();
  }
}

TEST(GlobalNorm, OfBf16GradientsHasTheBitsOfTheirFp32Copies) {
  std::vector<at::Tensor> low, full;
  for (int64_t n : {1000, 37, 4096}) {
    low.push_back(at::randn({n}).to(at::kBFloat16));
    full.push_back(low.back().to(at::kFloat));
  }
  low.push_back(at::randn({9}));  // an fp32 gradient among them keeps its place in the sum
  full.push_back(low.back());
  SingleProcessCommunicator comm;
  const std::vector<bool> counted(low.size(), true);
  const at::Tensor before = low[0].clone();
  GlobalNorm a = global_norm(low, counted, 0.5, comm, TRIAX_GROUP_WORLD);
  GlobalNorm b = global_norm(full, counted, 0.5, comm, TRIAX_GROUP_WORLD);
  EXPECT_TRUE(at::equal(a.norm, b.norm)) << a.norm.item<double>() << " vs " << b.norm.item<double>();
  EXPECT_TRUE(at::equal(a.coefficient, b.coefficient));
  EXPECT_LT(a.coefficient.item<double>(), 1.0);
  EXPECT_TRUE(at::equal(low[0], before));  // nothing scaled
  EXPECT_FALSE(global_norm(low, counted, std::nullopt, comm, TRIAX_GROUP_WORLD).coefficient.defined());
}

// An optimizer instance over copies of `initial`; `abi_1_7` cuts its table where ABI 1.7's ended.
struct OptimizerUnderTest {
  std::vector<at::Tensor> params;
  triax_optimizer_vtable vtable;
  std::unique_ptr<OptimizerInstance> instance;

  OptimizerUnderTest(const std::string& name, const std::vector<at::Tensor>& initial, bool abi_1_7)
      : vtable(testing::test_plugin_registry().optimizer(name)) {
    if (abi_1_7) vtable.struct_size = offsetof(triax_optimizer_vtable, step_scaled);
    for (const at::Tensor& p : initial) params.push_back(p.clone());
    instance = testing::make_optimizer(vtable, name, params,
                                       "optimizer_factory: {name: adamW, adam_beta1: 0.9, adam_beta2: 0.95}\n");
  }
};

// The reference is the path before ABI 1.8: fp32 gradients clipped in place, then step(). The
// scaled step of bf16 gradients, and the host's fallback for a 1.7 plugin, must give its bits.
void check_scaled_step(const std::string& name, bool sharded) {
  std::vector<at::Tensor> initial = {at::randn({6, 4}).to(at::kBFloat16), at::randn({11}).to(at::kBFloat16)};
  OptimizerUnderTest reference(name, initial, false), scaled(name, initial, false), old_abi(name, initial, true);
  EXPECT_TRUE(scaled.instance->takes_scaled_gradients());
  EXPECT_FALSE(old_abi.instance->takes_scaled_gradients());
  for (int t = 0; t < 4; ++t) {
    std::vector<at::Tensor> low;
    for (const at::Tensor& p : initial) {
      at::Tensor g = at::randn(p.sizes()).to(at::kBFloat16);
      low.push_back(sharded ? g.reshape({-1}) : g);
    }
    const at::Tensor coefficient = at::full({}, 0.37f + 0.1f * static_cast<float>(t));
    std::vector<at::Tensor> clipped;
    for (const at::Tensor& g : low) clipped.push_back(g.to(at::kFloat));
    at::_foreach_mul_(clipped, coefficient);
    reference.instance->step(clipped, 0.01);
    scaled.instance->step(low, 0.01, coefficient);
    old_abi.instance->step(low, 0.01, coefficient);
  }
  for (size_t i = 0; i < initial.size(); ++i) {
    EXPECT_TRUE(at::equal(scaled.params[i], reference.params[i])) << name << ", parameter " << i;
    EXPECT_TRUE(at::equal(old_abi.params[i], reference.params[i])) << name << " (ABI 1.7), parameter " << i;
  }
  auto reference_state = reference.instance->state(), scaled_state = scaled.instance->state();
  ASSERT_EQ(reference_state.size(), scaled_state.size());
  for (size_t k = 0; k < reference_state.size(); ++k)
    EXPECT_TRUE(at::equal(reference_state[k].tensor, scaled_state[k].tensor)) << name << ", " << reference_state[k].name;
}

TEST(AdamWPlugin, ScaledStepOfBf16GradientsEqualsTheClippedFp32Step) { check_scaled_step("adamw", false); }
TEST(Zero1AdamWPlugin, ScaledStepOfBf16GradientsEqualsTheClippedFp32Step) { check_scaled_step("zero1_adamw", true); }

// On CUDA the adamw plugin's step is one kernel (adamw_kernel.hpp) that reads bf16 gradients and
// applies the coefficient itself; the reference is LibTorch's fused AdamW on the fp32 gradients
// clipped in place, then the masters rounded into the parameters. The parameters cover the
// kernel's walks: 4-element vectors with a last block part full and 1 element left (4097 x 33), a
// gradient at an odd offset (1000), one vector and 2 elements left (2 x 3).
TEST(AdamWKernelCuda, ScaledStepOfBf16GradientsFollowsLibTorchsFusedAdamW) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  const at::TensorOptions cuda = at::TensorOptions().device(at::kCUDA);
  std::vector<at::Tensor> initial = {at::randn({4097, 33}, cuda).to(at::kBFloat16), at::randn({1000}, cuda).to(at::kBFloat16),
                                     at::randn({2, 3}, cuda).to(at::kBFloat16)};
  OptimizerUnderTest kernel("adamw", initial, false);
  std::vector<at::Tensor> masters, exp_avg, exp_avg_sq, steps;
  for (const at::Tensor& p : initial) {
    masters.push_back(p.to(at::kFloat));
    exp_avg.push_back(at::zeros_like(masters.back()));
    exp_avg_sq.push_back(at::zeros_like(masters.back()));
    steps.push_back(at::zeros({}, masters.back().options()));
  }
  const double lr = 0.01, decay = 0.1;  // OptimizerUnderTest: weight decay 0.1 on the first parameter only
  for (int t = 0; t < 5; ++t) {
    std::vector<at::Tensor> low, clipped;
    for (const at::Tensor& p : initial) {
      // The second gradient starts one element into its storage: no 16-byte vectors for it.
      const int64_t offset = clipped.size() == 1 ? 1 : 0;
      low.push_back(at::randn({p.numel() + offset}, cuda).to(at::kBFloat16).narrow(0, offset, p.numel()).view(p.sizes()));
      clipped.push_back(low.back().to(at::kFloat));
    }
    const at::Tensor coefficient = at::full({}, 0.3f + 0.1f * static_cast<float>(t), cuda);
    at::_foreach_mul_(clipped, coefficient);
    at::_foreach_add_(steps, 1.0);
    for (auto [first, end, wd] : {std::tuple<size_t, size_t, double>{0, 1, decay}, {1, 3, 0.0}}) {
      auto part = [&](const std::vector<at::Tensor>& v) {
        return std::vector<at::Tensor>(v.begin() + first, v.begin() + end);
      };
      at::_fused_adamw_(part(masters), part(clipped), part(exp_avg), part(exp_avg_sq), {}, part(steps), lr, 0.9, 0.95,
                        wd, 1e-8, false, false);
    }
    kernel.instance->step(low, lr, coefficient);
  }
  auto state = kernel.instance->state();
  int64_t differing = 0;
  for (size_t i = 0; i < initial.size(); ++i) {
    for (const OptimizerStateTensor& s : state) {
      if (s.param_index != static_cast<int64_t>(i) || s.per_parameter) continue;
      const at::Tensor& expected = s.name == "master" ? masters[i] : s.name == "exp_avg" ? exp_avg[i] : exp_avg_sq[i];
      const at::Tensor got = s.tensor.view(expected.sizes());
      // Within 1e-6 of the tensor's largest value: the same arithmetic, up to fp64 rounding and
      // contraction choices (it is not bit-identical to LibTorch's build of its kernel).
      const double scale = expected.abs().max().item<double>();
      EXPECT_LE((got - expected).abs().max().item<double>(), 1e-6 * scale)
          << s.name << " of parameter " << i << ": max difference " << (got - expected).abs().max().item<double>()
          << ", largest value " << scale;
      differing += (got != expected).sum().item<int64_t>();
    }
    for (const OptimizerStateTensor& s : state) {
      if (s.param_index == static_cast<int64_t>(i) && s.name == "master") {
        EXPECT_TRUE(at::equal(kernel.params[i], s.tensor.view(masters[i].sizes()).to(at::kBFloat16)))
            << "parameter " << i << " is not its master rounded";
      }
    }
  }
  std::printf("state elements differing in any bit from LibTorch's fused AdamW: %lld\n", static_cast<long long>(differing));
}

// Whole runs on one rank (before ABI 1.8 the handed-over run went through fp32 buffers).
TEST(Training, Bf16GradientsHandedOverAsComputedGiveTheFp32BuffersRun) {
  SingleProcessCommunicator comm;
  testing::expect_bf16_handoffs_agree(12, 4, comm, [](const std::string& name) { return testing::temp_run_dir(name); });
}

}  // namespace
}  // namespace triax
