// TRIAX_MAMBA_RECOMPUTE_CONV=1 (plugins/models/mamba/mamba_mixer.hpp): the mixer's conv, x_proj,
// dt_proj and scan run through recompute(), so the layer keeps neither u nor delta (nor the scan's
// other operands) for the backward. The tiny model's first layer with the switch on against it off:
// the output, the input's gradient and every parameter's gradient bit for bit (within the CUDA
// scan backward's own run-to-run noise: ssm_block_norm_check.hpp), and the bytes its forward keeps.
// MambaRecomputeConvCpu: fp32 (the LibTorch reference scan). MambaRecomputeConvCuda (label gpu;
// skipped without a GPU): bf16 and fp32 through the fused kernels.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "cpu_live_bytes.hpp"
#include "mamba_test_support.hpp"
#include "scoped_variable.hpp"
#include "ssm_block_norm_check.hpp"

namespace mamba_recompute_conv_test {  // named: the tests compile in unity batches

using namespace mamba_test;
using triax::test::BlockRun;
using triax::test::CpuLiveBytes;

constexpr int64_t kBatch = 2, kLength = 64, kHidden = 16, kInner = 32;  // tiny_yaml's d_model and d_inner

// The first layer of the tiny model built with the switch on or off (read as the mixer is built).
std::shared_ptr<triax::CausalLmLayer> first_layer(bool recompute, const ModelContext& context,
                                                  std::shared_ptr<MambaModel>& model) {
  const ScopedVariable setting("TRIAX_MAMBA_RECOMPUTE_CONV", recompute ? "1" : "0");
  model = build(tiny_yaml(false), context);
  for (const auto& module : model->modules(/*include_self=*/false))
    if (auto layer = std::dynamic_pointer_cast<triax::CausalLmLayer>(module)) return layer;
  ADD_FAILURE() << "no layer";
  return nullptr;
}

// Forward on x, backward from grad_out; the gradients of the input and of every parameter.
BlockRun run_first_layer(bool recompute, const ModelContext& context, const at::Tensor& x, const at::Tensor& grad_out) {
  std::shared_ptr<MambaModel> model;
  const std::shared_ptr<triax::CausalLmLayer> layer = first_layer(recompute, context, model);
  if (!layer) return {};
  const at::Tensor input = x.detach().clone().requires_grad_(true);
  const at::Tensor out = layer->forward(input, {});
  out.backward(grad_out);
  BlockRun run{0, out.detach(), input.grad(), {}};
  for (const auto& p : layer->named_parameters()) {
    EXPECT_TRUE(p.value().grad().defined()) << p.key();
    if (p.value().grad().defined()) run.grads[p.key()] = p.value().grad().clone();
  }
  return run;
}

void expect_switch_changes_no_bit(c10::ScalarType dtype, c10::Device device) {
  SCOPED_TRACE(c10::toString(dtype));
  ModelContext context = tiny_model_context();
  context.device = device;
  context.dtype = dtype;
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(7);
  const at::Tensor x = at::randn({kBatch, kLength, kHidden}, generator, at::kFloat).to(device);
  const at::Tensor grad_out = at::randn({kBatch, kLength, kHidden}, generator, at::kFloat).to(device);
  const BlockRun off = run_first_layer(false, context, x, grad_out), on = run_first_layer(true, context, x, grad_out);
  const BlockRun off_again = run_first_layer(false, context, x, grad_out);
  ASSERT_TRUE(on.out.defined() && off.out.defined() && off_again.out.defined());
  using triax::test::expect_same_bits_or_noise;
  expect_same_bits_or_noise(on.out, off.out, off_again.out, "the layer's output");
  expect_same_bits_or_noise(on.grad_x, off.grad_x, off_again.grad_x, "the input's gradient");
  ASSERT_EQ(on.grads.size(), off.grads.size());
  for (const auto& [name, grad] : off.grads)
    expect_same_bits_or_noise(on.grads.at(name), grad, off_again.grads.at(name), name);
}

// Bytes alive after the first layer's forward beyond its input and output (fp32 on the CPU).
int64_t kept_by_forward(bool recompute) {
  std::shared_ptr<MambaModel> model;
  const std::shared_ptr<triax::CausalLmLayer> layer = first_layer(recompute, tiny_model_context(), model);
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(8);
  const at::Tensor x = at::randn({kBatch, kLength, kHidden}, generator, at::kFloat).requires_grad_(true);
  CpuLiveBytes live;
  const int64_t before = live.bytes();
  const at::Tensor out = layer->forward(x, {});
  const int64_t kept = live.bytes() - before - static_cast<int64_t>(out.nbytes());
  out.sum().backward();  // the graph was whole: every parameter gets a gradient
  for (const at::Tensor& p : layer->parameters()) EXPECT_TRUE(p.grad().defined());
  return kept;
}

TEST(MambaRecomputeConvCpu, SwitchChangesNoBit) { expect_switch_changes_no_bit(at::kFloat, c10::kCPU); }

// The switch frees at least u and delta (two [b, d_inner, l] activations); the CPU reference
// scan's per-position graph goes too.
TEST(MambaRecomputeConvCpu, TheLayerKeepsFewerBytes) {
  const int64_t off = kept_by_forward(false), on = kept_by_forward(true);
  std::printf("kept by one layer's forward: %lld bytes, %lld with TRIAX_MAMBA_RECOMPUTE_CONV=1\n",
              static_cast<long long>(off), static_cast<long long>(on));
  EXPECT_GE(off - on, 2 * kBatch * kInner * kLength * 4);
}

TEST(MambaRecomputeConvCuda, SwitchChangesNoBit) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  for (c10::ScalarType dtype : {at::kBFloat16, at::kFloat})
    expect_switch_changes_no_bit(dtype, c10::Device(c10::kCUDA, 0));
}

}  // namespace mamba_recompute_conv_test
