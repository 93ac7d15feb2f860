// The check of the Mamba and Mamba-2 blocks' TRIAX_MAMBA_BLOCK_NORM_FUSED switch
// (plugins/models/mamba/ssm_block.hpp), shared by mamba_test and mamba2_test: a model's first layer
// (an SsmBlock, residual_in_fp32) built with the switch on and off from one seed, run forward on
// one fp32 residual and backward from one gradient; the output, the residual's gradient and every
// parameter's gradient are equal bit for bit, and the switch took the fused path
// (rms_norm_of_fp32_residual) where it should. Where the unfused block itself does not repeat its
// bits (run twice: Mamba's CUDA scan backward sums some gradients with atomics, in no fixed order),
// the switch may change a tensor by as much as that run-to-run difference (4 times it).
#pragma once

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "dispatched_ops.hpp"
#include "scoped_variable.hpp"
#include "triax/causal_lm.hpp"

namespace triax::test {

struct BlockRun {
  int64_t fused_norms;  // rms_norm_of_fp32_residual calls in the forward
  at::Tensor out, grad_x;
  std::map<std::string, at::Tensor> grads;
};

// The first layer of `build()` (which reads the switch as it builds) on x, backward from grad_out.
inline BlockRun run_first_block(bool fused, const std::function<std::shared_ptr<CausalLm>()>& build,
                                const at::Tensor& x, const at::Tensor& grad_out) {
  constexpr const char* kSwitch = "TRIAX_MAMBA_BLOCK_NORM_FUSED";
  std::shared_ptr<CausalLm> model;
  {
    const ScopedVariable setting(kSwitch, fused ? "1" : "0");
    model = build();
  }
  std::shared_ptr<CausalLmLayer> layer;  // the first layer the module tree holds
  for (const auto& module : model->modules(/*include_self=*/false))
    if ((layer = std::dynamic_pointer_cast<CausalLmLayer>(module))) break;
  EXPECT_TRUE(layer) << "no layer";
  if (!layer) return {};
  const at::Tensor input = x.detach().clone().requires_grad_(true);
  at::Tensor out;
  const int64_t fused_norms =
      count_dispatched_ops([&] { out = layer->forward(input, {}); }, {"triax::rms_norm_of_fp32_residual"});
  out.backward(grad_out);
  BlockRun run{fused_norms, out.detach(), input.grad(), {}};
  for (const auto& p : layer->named_parameters()) {
    EXPECT_TRUE(p.value().grad().defined()) << p.key();
    if (p.value().grad().defined()) run.grads[p.key()] = p.value().grad().clone();
  }
  return run;
}

// `on` equals `off` bit for bit where the unfused block repeats its bits (`off_again`), else within
// four times its run-to-run difference.
inline void expect_same_bits_or_noise(const at::Tensor& on, const at::Tensor& off, const at::Tensor& off_again,
                                      const std::string& what) {
  if (at::equal(off, off_again)) {
    EXPECT_TRUE(at::equal(on, off)) << what;
    return;
  }
  const double noise = (off_again - off).abs().max().item<double>();
  EXPECT_LE((on - off).abs().max().item<double>(), 4 * noise)
      << what << " (the unfused block varies by " << noise << " run to run)";
}

// `build()`: the model on the test's device and dtype; x and the gradient [2, 9, hidden].
// fused_path: whether the switch should take the block through rms_norm_of_fp32_residual.
inline void expect_block_norm_switch_changes_no_bit(const std::function<std::shared_ptr<CausalLm>()>& build,
                                                    int64_t hidden, c10::Device device, bool fused_path);

// The check for a tiny model of hidden 16 built by `build(context)` in `dtype` on `device`: only
// a 16-bit model takes the fused path.
inline void expect_tiny_block_norm_switch_changes_no_bit(
    const std::function<std::shared_ptr<CausalLm>(const ModelContext&)>& build, ModelContext context,
    c10::ScalarType dtype, c10::Device device) {
  SCOPED_TRACE(c10::toString(dtype));
  context.device = device;
  context.dtype = dtype;
  expect_block_norm_switch_changes_no_bit([&] { return build(context); }, 16, device, dtype != at::kFloat);
}

inline void expect_block_norm_switch_changes_no_bit(const std::function<std::shared_ptr<CausalLm>()>& build,
                                                    int64_t hidden, c10::Device device, bool fused_path) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(5);
  const at::Tensor x = at::randn({2, 9, hidden}, generator, at::kFloat).to(device);  // the fp32 residual stream
  const at::Tensor grad_out = at::randn({2, 9, hidden}, generator, at::kFloat).to(device);
  const BlockRun off = run_first_block(false, build, x, grad_out), on = run_first_block(true, build, x, grad_out);
  const BlockRun off_again = run_first_block(false, build, x, grad_out);
  ASSERT_TRUE(on.out.defined() && off.out.defined() && off_again.out.defined());
  EXPECT_EQ(off.fused_norms, 0);
  EXPECT_EQ(on.fused_norms, fused_path ? 1 : 0);
  ASSERT_EQ(on.out.scalar_type(), at::kFloat);
  expect_same_bits_or_noise(on.out, off.out, off_again.out, "the block's output");
  ASSERT_EQ(on.grad_x.scalar_type(), at::kFloat);
  expect_same_bits_or_noise(on.grad_x, off.grad_x, off_again.grad_x, "the residual's gradient");
  ASSERT_EQ(on.grads.size(), off.grads.size());
  for (const auto& [name, grad] : off.grads)
    expect_same_bits_or_noise(on.grads.at(name), grad, off_again.grads.at(name), name);
}

}  // namespace triax::test
