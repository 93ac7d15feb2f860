// The LibTorch reference of the selective scan and the causal conv1d (MambaScanCpu) against an
// independent evaluation in double loops: outputs, every gradient (central finite differences of
// the loops against autograd through the reference, fp64), a split sequence continued through
// selective_scan_with_state against one pass, and the refusals of malformed operands.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "mamba_scan_test_support.hpp"
#include "reference_scan.hpp"
#include "selective_scan.hpp"
#include "triax/error.hpp"

namespace {

using namespace mamba_scan_test;
using triax::mamba::SelectiveScanArgs;

// The named tensor operands of args (the defined ones), to perturb or differentiate.
std::vector<std::pair<std::string, at::Tensor*>> operands(SelectiveScanArgs& args) {
  std::vector<std::pair<std::string, at::Tensor*>> all = {
      {"u", &args.u}, {"delta", &args.delta}, {"A", &args.A}, {"B", &args.B},
      {"C", &args.C}, {"D", &args.D},         {"z", &args.z}, {"delta_bias", &args.delta_bias}};
  std::vector<std::pair<std::string, at::Tensor*>> defined;
  for (auto& entry : all)
    if (entry.second->defined()) defined.push_back(entry);
  return defined;
}

// d(sum(y * weight))/d(x) for every element of x by central differences of `loss`.
at::Tensor finite_difference(at::Tensor& x, const std::function<double()>& loss) {
  const double step = 1e-6;
  at::Tensor grad = at::zeros_like(x);
  auto flat = x.view({-1});
  for (int64_t i = 0; i < flat.numel(); ++i) {
    const double saved = flat[i].item<double>();
    flat[i] = saved + step;
    const double up = loss();
    flat[i] = saved - step;
    const double down = loss();
    flat[i] = saved;
    grad.view({-1})[i] = (up - down) / (2 * step);
  }
  return grad;
}

struct Variant {
  bool d, z, bias, softplus;
};
const Variant kVariants[] = {{true, true, true, true}, {false, false, false, true}, {true, false, true, false}};

TEST(MambaScanCpu, ForwardMatchesLoops) {
  // 150 positions: more than the reference's block of 128, not a multiple of it.
  for (const ScanShape shape : {ScanShape{2, 3, 150, 4}, ScanShape{1, 5, 17, 16}})
    for (const Variant& v : kVariants) {
      SelectiveScanArgs args = scan_inputs(shape, 11, v.d, v.z, v.bias);
      args.delta_softplus = v.softplus;
      if (!v.softplus) args.delta = at::softplus(args.delta);  // keep dt positive
      const auto [want_y, want_state] = scan_by_loops(args, at::Tensor());
      const auto [y, state] = triax::mamba::selective_scan_reference(args, at::Tensor());
      EXPECT_LT(relative_error(y, want_y), 1e-12);
      EXPECT_LT(relative_error(state, want_state), 1e-12);
      EXPECT_LT(relative_error(triax::mamba::selective_scan(args), want_y), 1e-12);
      // fp32 inputs: fp32 arithmetic.
      SelectiveScanArgs args32 = args;
      for (auto& [name, t] : operands(args32)) *t = t->to(at::kFloat);
      EXPECT_LT(relative_error(triax::mamba::selective_scan(args32), want_y), 1e-5);
    }
}

TEST(MambaScanCpu, GradientsMatchFiniteDifferencesOfLoops) {
  for (const Variant& v : kVariants) {
    SelectiveScanArgs args = scan_inputs({2, 3, 7, 4}, 21, v.d, v.z, v.bias);
    args.delta_softplus = v.softplus;
    if (!v.softplus) args.delta = at::softplus(args.delta);
    const at::Tensor weight = seeded({2, 3, 7}, 29);
    auto loss = [&] { return (scan_by_loops(args, at::Tensor()).first * weight).sum().item<double>(); };

    SelectiveScanArgs leaves = args;
    for (auto& [name, t] : operands(leaves)) *t = t->detach().clone().requires_grad_(true);
    (triax::mamba::selective_scan(leaves) * weight).sum().backward();
    auto leaf_list = operands(leaves);
    auto arg_list = operands(args);
    for (size_t i = 0; i < arg_list.size(); ++i) {
      const at::Tensor want = finite_difference(*arg_list[i].second, loss);
      const at::Tensor got = leaf_list[i].second->grad();
      ASSERT_TRUE(got.defined()) << arg_list[i].first;
      EXPECT_LT(relative_error(got, want), 1e-6) << arg_list[i].first;
    }
  }
}

TEST(MambaScanCpu, WithStateContinuesASplitSequence) {
  const ScanShape shape{2, 4, 150, 16};
  const SelectiveScanArgs args = scan_inputs(shape, 31, true, true, true);
  const at::Tensor start = seeded({2, 4, 16}, 37).to(at::kFloat);
  const auto [want_y, want_state] = scan_by_loops(args, start);
  auto part = [&](int64_t from, int64_t len) {
    SelectiveScanArgs p = args;
    for (at::Tensor* t : {&p.u, &p.delta, &p.z, &p.B, &p.C}) *t = t->narrow(2, from, len).contiguous();
    return p;
  };
  const auto [y1, state1] = triax::mamba::selective_scan_with_state(part(0, 61), start);
  const auto [y2, state2] = triax::mamba::selective_scan_with_state(part(61, 89), state1);
  EXPECT_EQ(state2.scalar_type(), at::kFloat);
  EXPECT_LT(relative_error(at::cat({y1, y2}, 2), want_y), 1e-6);
  EXPECT_LT(relative_error(state2, want_state), 1e-6);
  // One pass equals the split.
  const auto [y_one, state_one] = triax::mamba::selective_scan_with_state(args, start);
  EXPECT_LT(relative_error(at::cat({y1, y2}, 2), y_one), 1e-6);
  EXPECT_LT(relative_error(state2, state_one), 1e-6);
  // bf16 inputs: y in bf16, the state in fp32.
  SelectiveScanArgs half = args;
  for (at::Tensor* t : {&half.u, &half.delta, &half.z, &half.B, &half.C}) *t = t->to(at::kBFloat16);
  const auto [y_bf16, state_bf16] = triax::mamba::selective_scan_with_state(half, start);
  EXPECT_EQ(y_bf16.scalar_type(), at::kBFloat16);
  EXPECT_EQ(state_bf16.scalar_type(), at::kFloat);
}

TEST(MambaScanCpu, ConvMatchesLoopsAndFiniteDifferences) {
  for (const bool silu : {true, false})
    for (const bool with_bias : {true, false}) {
      at::Tensor x = seeded({2, 3, 9}, 41), weight = seeded({3, 4}, 43);
      at::Tensor bias = with_bias ? seeded({3}, 47) : at::Tensor();
      EXPECT_LT(
          relative_error(triax::mamba::causal_conv1d(x, weight, bias, silu), conv_by_loops(x, weight, bias, silu)),
          1e-12);
      const at::Tensor g = seeded({2, 3, 9}, 53);
      auto loss = [&] { return (conv_by_loops(x, weight, bias, silu) * g).sum().item<double>(); };
      at::Tensor lx = x.clone().requires_grad_(true), lw = weight.clone().requires_grad_(true);
      at::Tensor lb = with_bias ? bias.clone().requires_grad_(true) : at::Tensor();
      (triax::mamba::causal_conv1d(lx, lw, lb, silu) * g).sum().backward();
      EXPECT_LT(relative_error(lx.grad(), finite_difference(x, loss)), 1e-6);
      EXPECT_LT(relative_error(lw.grad(), finite_difference(weight, loss)), 1e-6);
      if (with_bias) {
        EXPECT_LT(relative_error(lb.grad(), finite_difference(bias, loss)), 1e-6);
      }
    }
  // A kernel longer than the sequence: every tap before position 0 reads zero.
  const at::Tensor x = seeded({1, 2, 3}, 59), weight = seeded({2, 5}, 61);
  EXPECT_LT(relative_error(triax::mamba::causal_conv1d(x, weight, at::Tensor(), true),
                           conv_by_loops(x, weight, at::Tensor(), true)),
            1e-12);
}

TEST(MambaScanCpu, MalformedOperandsAreNamed) {
  SelectiveScanArgs args = scan_inputs({2, 3, 8, 4}, 71, true, true, true);
  SelectiveScanArgs bad = args;
  bad.B = bad.B.transpose(1, 2);
  EXPECT_NE(triax::test::error_of<triax::Error>([&] { triax::mamba::selective_scan(bad); }).find("B must be [b, n, l]"),
            std::string::npos);
  bad = args;
  bad.D = at::ones({4}, at::kDouble);
  EXPECT_NE(triax::test::error_of<triax::Error>([&] { triax::mamba::selective_scan(bad); }).find("D must be [d]"),
            std::string::npos);
  EXPECT_NE(triax::test::error_of<triax::Error>([&] {
              triax::mamba::selective_scan_with_state(args, at::zeros({2, 3, 5}));
            }).find("initial_state must be [b, d, n]"),
            std::string::npos);
  EXPECT_NE(triax::test::error_of<triax::Error>([&] {
              triax::mamba::causal_conv1d(at::ones({2, 3, 8}), at::ones({4, 4}), at::Tensor(), true);
            }).find("weight must be [d, k]"),
            std::string::npos);
}

}  // namespace
