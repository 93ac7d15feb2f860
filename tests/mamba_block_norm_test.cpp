// A Mamba block's training forward and backward with TRIAX_MAMBA_BLOCK_NORM_FUSED=1
// (rms_norm_of_fp32_residual: the norm reads the fp32 residual, its backward writes the residual's
// gradient in fp32 with the residual stream's added) against the same block without it (the
// cast, rms_norm, autograd's cast and sum): the output, the input's gradient and every parameter's
// gradient bit for bit, for the tiny model's first layer (residual_in_fp32) from one seed.
// MambaBlockNormCpu: bf16 on the CPU (the composition either way). MambaBlockNormCuda (label gpu;
// skipped without a GPU): bf16 and fp16 (the fused kernels) and fp32 (the switch leaves an fp32
// model's block as it was).
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "dispatched_ops.hpp"
#include "mamba_test_support.hpp"

namespace mamba_block_norm_test {  // named: the tests compile in unity batches

using namespace mamba_test;

constexpr const char* kSwitch = "TRIAX_MAMBA_BLOCK_NORM_FUSED";

struct BlockResults {
  int64_t fused_norms;  // rms_norm_of_fp32_residual calls in the forward
  at::Tensor out, grad_x;
  std::map<std::string, at::Tensor> grads;
};

// The first layer of the tiny model (built with the switch on or off) on x, backward from grad_out.
BlockResults run_block(bool fused, const ModelContext& context, const at::Tensor& x, const at::Tensor& grad_out) {
  if (fused) setenv(kSwitch, "1", 1);
  std::shared_ptr<MambaModel> model = build(tiny_yaml(false), context);  // the switch is read here
  unsetenv(kSwitch);
  std::shared_ptr<triax::CausalLmLayer> first;  // the first layer the module tree holds
  for (const auto& module : model->modules(/*include_self=*/false))
    if ((first = std::dynamic_pointer_cast<triax::CausalLmLayer>(module))) break;
  EXPECT_TRUE(first) << "no layer";
  triax::CausalLmLayer& layer = *first;
  const at::Tensor input = x.detach().clone().requires_grad_(true);
  at::Tensor out;
  const int64_t fused_norms =
      count_dispatched_ops([&] { out = layer.forward(input, {}); }, {"triax::rms_norm_of_fp32_residual"});
  out.backward(grad_out);
  BlockResults results{fused_norms, out.detach(), input.grad(), {}};
  for (const auto& p : layer.named_parameters()) {
    EXPECT_TRUE(p.value().grad().defined()) << p.key();
    if (p.value().grad().defined()) results.grads[p.key()] = p.value().grad().clone();
  }
  return results;
}

// fused_path: whether the switch takes the block through rms_norm_of_fp32_residual.
void expect_switch_changes_no_bit(c10::ScalarType dtype, c10::Device device, bool fused_path = true) {
  SCOPED_TRACE(c10::toString(dtype));
  ModelContext context = tiny_model_context();
  context.device = device;
  context.dtype = dtype;
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(5);
  const at::Tensor x = at::randn({2, 9, 16}, generator, at::kFloat).to(device);  // the fp32 residual stream
  const at::Tensor grad_out = at::randn({2, 9, 16}, generator, at::kFloat).to(device);
  const BlockResults off = run_block(false, context, x, grad_out), on = run_block(true, context, x, grad_out);
  EXPECT_EQ(off.fused_norms, 0);
  EXPECT_EQ(on.fused_norms, fused_path ? 1 : 0);
  ASSERT_EQ(on.out.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(on.out, off.out)) << "the block's output";
  ASSERT_EQ(on.grad_x.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(on.grad_x, off.grad_x)) << "the residual's gradient";
  ASSERT_EQ(on.grads.size(), off.grads.size());
  for (const auto& [name, grad] : off.grads) EXPECT_TRUE(at::equal(on.grads.at(name), grad)) << name;
}

TEST(MambaBlockNormCpu, SwitchChangesNoBit) { expect_switch_changes_no_bit(at::kBFloat16, c10::kCPU); }

TEST(MambaBlockNormCuda, SwitchChangesNoBit) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  for (c10::ScalarType dtype : {at::kBFloat16, at::kHalf})
    expect_switch_changes_no_bit(dtype, c10::Device(c10::kCUDA, 0));
  expect_switch_changes_no_bit(at::kFloat, c10::Device(c10::kCUDA, 0), /*fused_path=*/false);
}

}  // namespace mamba_block_norm_test
