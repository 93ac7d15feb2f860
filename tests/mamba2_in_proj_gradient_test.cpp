// The gradient of in_proj's output landed in one tensor (in_proj_gradient.hpp,
// TRIAX_MAMBA2_LANDED_IN_PROJ_GRADIENT). On the CPU, with a test consumer whose backward writes its
// gradient into the slot it is given: the split's gradient equals LibTorch's split (its cat) bit for
// bit, and the split's backward copies only the parts that did not land (none when all did; one
// cat when none did); a part read twice, a part unused, a copy of a part (no slot) and a second
// request for a slot. A bf16 mixer step with the switch on and off, bit for bit on the CPU, and
// (Mamba2InProjGradientCuda, with a GPU) on CUDA, where the gated norm's and the convolution's
// kernels land z's and xBC's gradients: bit for bit, and one cat fewer a step.
#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/custom_function.h>

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "in_proj_gradient.hpp"
#include "mamba2_test_support.hpp"
#include "model_reference_support.hpp"
#include "ops_by_caller.hpp"
#include "scoped_variable.hpp"

namespace mamba2_in_proj_gradient_test {  // named: the tests compile in unity batches

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using triax::mamba2::InProjGradient;

constexpr const char* kSwitch = "TRIAX_MAMBA2_LANDED_IN_PROJ_GRADIENT";

// y = 3 x^2; its backward writes 6 x g into x's slot of `gradient` where it is given one (no copy:
// the product's output is the slot), else returns a new tensor.
struct SquareThatLands : torch::autograd::Function<SquareThatLands> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x,
                            const c10::intrusive_ptr<InProjGradient>& gradient) {
    ctx->save_for_backward({x});
    ctx->saved_data["gradient"] = triax::mamba2::as_saved(gradient);
    return x * x * 3;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor x = ctx->get_saved_variables()[0];
    const c10::intrusive_ptr<InProjGradient> gradient = triax::mamba2::from_saved(ctx->saved_data["gradient"]);
    at::Tensor slot = gradient ? gradient->slot_for(x) : at::Tensor();
    if (!slot.defined()) return {x * 6 * grads[0], at::Tensor()};
    at::mul_out(slot, x * 6, grads[0]);
    return {slot, at::Tensor()};
  }
};

enum class Use { lands, libtorch, twice, unused, copied };

struct Split {
  at::Tensor gradient;          // of the leaf the output came from
  ops_by_caller::OpCounts ops;  // the backward's
};

// An output [2, 6, 2, 11] (two groups, parts 4, 5 and 2 wide) split with the switch at `on`, each
// part used as `uses` says, summed against fixed weights and differentiated.
Split split_and_differentiate(bool on, const std::vector<Use>& uses) {
  const ScopedVariable setting(kSwitch, on ? "1" : "0");
  const at::Tensor leaf = at::randn({2, 6, 2, 11}, at::make_generator<at::CPUGeneratorImpl>(3)).requires_grad_(true);
  const at::Tensor output = leaf * 1;
  const c10::intrusive_ptr<InProjGradient> gradient = triax::mamba2::in_proj_gradient_for(output);
  EXPECT_EQ(static_cast<bool>(gradient), on);
  const std::vector<at::Tensor> parts = triax::mamba2::split_in_proj_output(output, {4, 5, 2}, gradient);
  at::Tensor loss = at::zeros({}, output.options());
  for (size_t i = 0; i < parts.size(); ++i) {
    const at::Tensor weight = at::arange(parts[i].numel(), output.options()).view(parts[i].sizes()).cos();
    auto lands = [&](const at::Tensor& x) { return SquareThatLands::apply(x, gradient); };
    switch (uses[i]) {
      case Use::lands:
        loss = loss + (lands(parts[i]) * weight).sum();
        break;
      case Use::libtorch:
        loss = loss + (at::sin(parts[i]) * weight).sum();
        break;
      case Use::twice:  // the second consumer finds the slot given
        loss = loss + (lands(parts[i]) * weight).sum() + (lands(parts[i]) * weight.exp()).sum();
        break;
      case Use::unused:
        break;
      case Use::copied:  // a copy of the part is no view of the output: no slot
        loss = loss + (lands(parts[i].contiguous()) * weight).sum();
        break;
    }
  }
  Split result;
  result.ops = ops_by_caller::count_ops([&] { loss.backward(); });
  result.gradient = leaf.grad();
  return result;
}

int64_t count_of(const ops_by_caller::OpCounts& ops, const std::string& name) {
  int64_t n = 0;
  for (const auto& [op, count] : ops)
    if (op == name || op.rfind(name + " <- ", 0) == 0) n += count;
  return n;
}

void expect_landed(const std::vector<Use>& uses, int64_t copies, int64_t cats) {
  const Split off = split_and_differentiate(false, uses), on = split_and_differentiate(true, uses);
  ASSERT_TRUE(on.gradient.defined() && off.gradient.defined());
  EXPECT_TRUE(at::equal(on.gradient, off.gradient)) << triax::test::max_relative_diff(on.gradient, off.gradient);
  EXPECT_EQ(count_of(off.ops, "aten::cat"), 1);  // LibTorch's split backward
  EXPECT_EQ(count_of(on.ops, "aten::cat"), cats);
  EXPECT_EQ(count_of(on.ops, "aten::copy_") - count_of(off.ops, "aten::copy_"), copies);
}

TEST(Mamba2InProjGradient, PartsThatAllLandAreNeitherCopiedNorJoined) {
  expect_landed({Use::lands, Use::lands, Use::lands}, 0, 0);
}

TEST(Mamba2InProjGradient, OnlyThePartsThatDidNotLandAreCopied) {
  expect_landed({Use::lands, Use::lands, Use::libtorch}, 1, 0);   // the mixer's dt
  expect_landed({Use::copied, Use::lands, Use::libtorch}, 2, 0);  // and z where the reshape copies
}

TEST(Mamba2InProjGradient, APartReadTwiceOrUnusedGetsItsSumOrZeros) {
  expect_landed({Use::twice, Use::unused, Use::lands}, 1, 0);  // the sum copied; the unused part zeroed
}

TEST(Mamba2InProjGradient, NothingLandedTakesOneCat) {
  expect_landed({Use::libtorch, Use::libtorch, Use::libtorch}, 0, 1);
}

TEST(Mamba2InProjGradient, GivesASlotOnlyToAViewOfTheOutputOnce) {
  const at::Tensor output = at::zeros({2, 3, 1, 8}, at::kFloat).requires_grad_(true);
  const c10::intrusive_ptr<InProjGradient> gradient = triax::mamba2::in_proj_gradient_for(output);
  ASSERT_TRUE(gradient);
  const at::Tensor part = output.narrow(3, 5, 3);
  const at::Tensor slot = gradient->slot_for(part);
  ASSERT_TRUE(slot.defined());
  EXPECT_EQ(slot.sizes(), part.sizes());
  EXPECT_EQ(slot.strides(), part.strides());
  EXPECT_FALSE(gradient->slot_for(part).defined());               // given before
  EXPECT_FALSE(gradient->slot_for(part.contiguous()).defined());  // a copy
  EXPECT_FALSE(gradient->slot_for(part.to(at::kDouble)).defined());
  const at::Tensor other = gradient->slot_for(output.narrow(3, 0, 5));
  ASSERT_TRUE(other.defined());
  EXPECT_EQ(static_cast<const char*>(slot.const_data_ptr()) - static_cast<const char*>(other.const_data_ptr()),
            5 * static_cast<int64_t>(sizeof(float)));  // one buffer, laid out as the output
  {
    const at::NoGradGuard no_grad;
    EXPECT_FALSE(triax::mamba2::in_proj_gradient_for(output));  // nothing to land without autograd
  }
  EXPECT_FALSE(triax::mamba2::in_proj_gradient_for(output.transpose(1, 3)));  // not contiguous
}

// One bf16 mixer step on `device` with the switch at `value`: the output and every gradient.
std::vector<at::Tensor> mixer_step(const std::string& yaml, c10::Device device, at::IntArrayRef shape,
                                   const char* value) {
  const ScopedVariable setting(kSwitch, value);
  return mamba2_test::output_and_gradients(mamba2_test::bf16_mixer_step(yaml, device, shape, 13));
}

void expect_the_same_with_the_switch_on_and_off(const std::string& yaml, c10::Device device, at::IntArrayRef shape) {
  const std::vector<at::Tensor> off = mixer_step(yaml, device, shape, "0"), on = mixer_step(yaml, device, shape, "1");
  ASSERT_EQ(on.size(), off.size());
  for (size_t i = 0; i < off.size(); ++i) {
    ASSERT_TRUE(on[i].defined() && off[i].defined()) << "tensor " << i;
    EXPECT_TRUE(at::equal(on[i], off[i]))
        << "tensor " << i << ": " << triax::test::max_relative_diff(on[i].cpu(), off[i].cpu());
  }
}

const char* const kTwoGroups =
    "hidden_size: 64\nnum_hidden_layers: 1\nvocab_size: 30\nnum_heads: 8\nhead_dim: 16\nstate_size: 32\n"
    "n_groups: 2\nchunk_size: 64\n";
// The 780m layer's layout, small: one group (z a view of in_proj's output), head_dim 64, state 128.
const char* const kOneGroup =
    "hidden_size: 256\nnum_hidden_layers: 1\nvocab_size: 30\nnum_heads: 8\nhead_dim: 64\nstate_size: 128\n"
    "n_groups: 1\nchunk_size: 256\n";

TEST(Mamba2InProjGradient, AMixerStepIsTheSameWithTheSwitchOnAndOff) {
  expect_the_same_with_the_switch_on_and_off(kTwoGroups, at::kCPU, {2, 40, 64});
  expect_the_same_with_the_switch_on_and_off(kOneGroup, at::kCPU, {1, 64, 256});
}

// The aten::cat calls `work` makes on any thread (the backward of CUDA tensors runs on the
// engine's device thread, which ops_by_caller's thread-local callback does not see).
int64_t cats_in(const std::function<void()>& work) {
  static std::atomic<int64_t> cats{0};
  cats = 0;
  const at::CallbackHandle handle = at::addGlobalCallback(
      at::RecordFunctionCallback([](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
        if (std::string(fn.name()) == "aten::cat") ++cats;
        return nullptr;
      }).scopes({at::RecordScope::FUNCTION}));
  work();
  at::removeCallback(handle);
  return cats.load();
}

// On CUDA z's gradient (one group: z is a view; two: a copy, so its gradient is copied in) and
// xBC's land from the kernels: the same bits as the cat, and the step makes one cat fewer.
TEST(Mamba2InProjGradientCuda, AMixerStepIsTheSameBitForBitWithOneCatFewer) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  expect_the_same_with_the_switch_on_and_off(kTwoGroups, at::kCUDA, {2, 200, 64});
  expect_the_same_with_the_switch_on_and_off(kOneGroup, at::kCUDA, {2, 512, 256});
  struct Case {
    const char* yaml;
    int64_t hidden;
  };
  for (const Case& c : {Case{kOneGroup, 256}, Case{kTwoGroups, 64}}) {
    auto cats_with = [&](const char* value) {
      const ScopedVariable setting(kSwitch, value);
      const mamba2_test::Bf16MixerStep step = mamba2_test::bf16_mixer_step(c.yaml, at::kCUDA, {2, 512, c.hidden}, 13);
      return cats_in([&] { step.mixer->forward(step.hidden).backward(step.grad); });
    };
    EXPECT_EQ(cats_with("0") - cats_with("1"), 1) << c.yaml;
  }
}

}  // namespace mamba2_in_proj_gradient_test
