// The Mamba-2 mixer's token-major causal conv1d + SiLU (plugins/models/mamba2/mixer/
// token_major_conv.hpp): on CPU against an independent shifted sum in fp64; with a GPU
// (Mamba2TokenMajorConvCuda) the kernels, switched on, against the CPU's fp64 result on the same
// values (outputs and the gradients of the input, the taps and the bias) for in_proj-like strided
// views over one and several groups, widths 2 to 6, lengths no run divides, vector and element
// layouts; the staged loads bit for bit against the direct ones; and one mixer's step with the
// switch on against the switch off.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mamba2_test_support.hpp"
#include "model_reference_support.hpp"
#include "scoped_variable.hpp"
#include "token_major_conv.hpp"

#ifdef TRIAX_WITH_CUDA
#include "token_major_conv_cuda.hpp"
#endif

namespace {

using triax::mamba2::token_major_causal_conv1d;
using triax::test::max_abs_diff;

struct ConvCase {
  int64_t batch, length, groups, group_channels, width;
  bool bias;
};

// The convolution's operands: in_proj's output [b, s, groups, group_channels + 8] (fp64), of which
// the input is the group_channels after `offset` (5: element loads; 8: 16-byte vectors where the
// strides allow); the taps, the bias (or undefined).
struct Operands {
  at::Tensor projection, weight, bias;
  int64_t offset = 5;
  at::Tensor input_of(const at::Tensor& p) const { return p.narrow(3, offset, p.size(3) - 8); }
  at::Tensor input() const { return input_of(projection); }
};

Operands operands_of(const ConvCase& c, uint64_t seed) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
  const at::TensorOptions f64 = at::TensorOptions().dtype(at::kDouble);
  Operands o;
  o.projection = at::randn({c.batch, c.length, c.groups, c.group_channels + 8}, g, f64);
  o.weight = at::randn({c.groups * c.group_channels, c.width}, g, f64) * 0.5;
  if (c.bias) o.bias = at::randn({c.groups * c.group_channels}, g, f64) * 0.1;
  return o;
}

// y[t] = silu(bias + sum_j w[j] x[t - (k - 1) + j]) in fp64, the shifts written out.
at::Tensor shifted_sum(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const int64_t b = x.size(0), s = x.size(1), k = weight.size(1);
  const at::Tensor flat = x.reshape({b, s, -1});
  at::Tensor y = bias.defined() ? bias.expand(flat.sizes()).clone() : at::zeros(flat.sizes(), flat.options());
  for (int64_t j = 0; j < k; ++j) {
    const int64_t shift = k - 1 - j;
    if (shift < s) y.narrow(1, shift, s - shift).add_(flat.narrow(1, 0, s - shift) * weight.select(1, j));
  }
  return at::silu(y);
}

TEST(Mamba2TokenMajorConv, MatchesAShiftedSumOnCpu) {
  for (const ConvCase& c : {ConvCase{2, 13, 1, 6, 4, true}, ConvCase{1, 9, 3, 5, 3, false}}) {
    const Operands o = operands_of(c, 3);
    const at::Tensor y = token_major_causal_conv1d(o.input(), o.weight, o.bias);
    EXPECT_EQ(y.sizes(), (std::vector<int64_t>{c.batch, c.length, c.groups * c.group_channels}));
    EXPECT_LT(max_abs_diff(y, shifted_sum(o.input(), o.weight, o.bias)), 1e-12);
  }
}

#ifdef TRIAX_WITH_CUDA

// max |got - want| / max |want|, on the CPU whatever the devices.
double conv_error(const at::Tensor& got, const at::Tensor& want) {
  return max_abs_diff(got.to(at::kDouble).cpu(), want.to(at::kDouble).cpu()) / want.abs().max().item<double>();
}

// Output, then the gradients of in_proj's output, the taps and the bias, of sum(y * grad_weights).
std::vector<at::Tensor> convolved_and_gradients(const Operands& o, const at::Tensor& grad_weights, c10::Device device,
                                                c10::ScalarType type) {
  const c10::ScalarType parameters = type == at::kDouble ? at::kDouble : at::kFloat;
  // Detached: on the CPU in fp64 `to` returns the operand itself, which would otherwise keep
  // requires_grad for the CUDA call and make its copies non-leaves without .grad.
  const at::Tensor projection = o.projection.to(device, type).detach().requires_grad_(true);
  const at::Tensor weight = o.weight.to(device, parameters).detach().requires_grad_(true);
  const at::Tensor bias = o.bias.defined() ? o.bias.to(device, parameters).detach().requires_grad_(true) : at::Tensor();
  const at::Tensor y = token_major_causal_conv1d(o.input_of(projection), weight, bias);
  (y.to(at::kDouble) * grad_weights.to(device)).sum().backward();
  return {y, projection.grad(), weight.grad(), bias.defined() ? bias.grad() : at::Tensor()};
}

TEST(Mamba2TokenMajorConvCuda, MatchesTheCpuInFp32AndBf16) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  const ScopedVariable on("TRIAX_MAMBA2_TOKEN_MAJOR_CONV", "1");
  // 780m's channels (3328, one group), groups of 40 channels (vectors at offset 8), of 12 (bf16
  // element loads: not a multiple of 8), widths 2 to 6 (the 8-tap window), lengths 1 and runs cut short.
  for (const ConvCase& c :
       {ConvCase{2, 300, 1, 3328, 4, true}, ConvCase{3, 77, 2, 40, 4, false}, ConvCase{2, 129, 3, 12, 3, true},
        ConvCase{1, 1, 1, 16, 4, true}, ConvCase{2, 70, 2, 24, 6, true}, ConvCase{1, 45, 1, 8, 2, false}}) {
    for (const int64_t offset : {5, 8}) {
      Operands o = operands_of(c, 7);
      o.offset = offset;
      at::Generator g = at::make_generator<at::CPUGeneratorImpl>(8);
      const at::Tensor grad_weights =
          at::randn({c.batch, c.length, c.groups * c.group_channels}, g, at::TensorOptions().dtype(at::kDouble));
      // The CPU reference on the values the GPU sees (bf16-rounded inputs for the bf16 run).
      for (c10::ScalarType type : {at::kFloat, at::kBFloat16}) {
        Operands rounded = o;
        rounded.projection = o.projection.to(type).to(at::kDouble);
        rounded.weight = o.weight.to(at::kFloat).to(at::kDouble);
        if (o.bias.defined()) rounded.bias = o.bias.to(at::kFloat).to(at::kDouble);
        const std::vector<at::Tensor> want = convolved_and_gradients(rounded, grad_weights, at::kCPU, at::kDouble);
        EXPECT_TRUE(triax::mamba2::token_major_conv_applies(rounded.input().to(at::kCUDA, type),
                                                            rounded.weight.to(at::kCUDA, at::kFloat), at::Tensor()));
        const std::vector<at::Tensor> got = convolved_and_gradients(rounded, grad_weights, at::kCUDA, type);
        const double tolerance = type == at::kFloat ? 1e-4 : 1e-2;
        const std::string what = "channels " + std::to_string(c.group_channels) + " width " + std::to_string(c.width) +
                                 " length " + std::to_string(c.length) + " offset " + std::to_string(offset) +
                                 (type == at::kFloat ? " fp32" : " bf16");
        for (size_t i = 0; i < want.size(); ++i) {
          if (!want[i].defined()) continue;
          ASSERT_TRUE(got[i].defined()) << i << " " << what;
          EXPECT_EQ(got[i].sizes(), want[i].sizes()) << i << " " << what;
          EXPECT_LT(conv_error(got[i], want[i]), tolerance) << "output " << i << " " << what;
        }
      }
    }
  }
}

TEST(Mamba2TokenMajorConvCuda, StagedLoadsGiveTheDirectLoadsBits) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  const ScopedVariable on("TRIAX_MAMBA2_TOKEN_MAJOR_CONV", "1");
  // Vector layouts (the staged kernels' only ones): 780m's channels, several groups, runs cut
  // short, a length shorter than the window, the 8-tap window (width 6).
  for (const ConvCase& c : {ConvCase{2, 300, 1, 3328, 4, true}, ConvCase{3, 77, 2, 40, 4, false},
                            ConvCase{1, 2, 1, 16, 4, true}, ConvCase{2, 70, 2, 24, 6, true}}) {
    Operands o = operands_of(c, 11);
    o.offset = 8;  // 16-byte vectors
    at::Generator g = at::make_generator<at::CPUGeneratorImpl>(12);
    const at::Tensor grad_weights =
        at::randn({c.batch, c.length, c.groups * c.group_channels}, g, at::TensorOptions().dtype(at::kDouble));
    for (c10::ScalarType type : {at::kFloat, at::kBFloat16}) {
      std::vector<at::Tensor> direct, staged;
      {
        const ScopedVariable loads("TRIAX_MAMBA2_CONV_STAGED", "0");
        direct = convolved_and_gradients(o, grad_weights, at::kCUDA, type);
      }
      {
        const ScopedVariable loads("TRIAX_MAMBA2_CONV_STAGED", "1");
        staged = convolved_and_gradients(o, grad_weights, at::kCUDA, type);
      }
      const std::string what = "channels " + std::to_string(c.group_channels) + " width " + std::to_string(c.width) +
                               " length " + std::to_string(c.length) + (type == at::kFloat ? " fp32" : " bf16");
      for (size_t i = 0; i < direct.size(); ++i) {
        if (!direct[i].defined()) continue;
        ASSERT_TRUE(staged[i].defined()) << i << " " << what;
        EXPECT_TRUE(at::equal(staged[i], direct[i])) << "output " << i << " " << what;
      }
    }
  }
}

TEST(Mamba2TokenMajorConvCuda, OneMixerStepAgreesWithTheChannelMajorConv) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  // The token-major conv switched on or off (Mamba-1's channel-major kernel between two copies).
  const std::vector<at::Tensor> off = mamba2_test::cuda_mixer_step("TRIAX_MAMBA2_TOKEN_MAJOR_CONV", "0");
  const std::vector<at::Tensor> on = mamba2_test::cuda_mixer_step("TRIAX_MAMBA2_TOKEN_MAJOR_CONV", "1");
  ASSERT_EQ(on.size(), off.size());
  for (size_t i = 0; i < off.size(); ++i) EXPECT_LT(conv_error(on[i], off[i]), 2e-2) << "tensor " << i;
}

#endif  // TRIAX_WITH_CUDA

}  // namespace
