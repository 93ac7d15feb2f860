// TRIAX_MAMBA_RECOMPUTE_CONV=1 (plugins/models/mamba/mamba_mixer.hpp): the mixer's part
// between in_proj and out_proj runs as mamba_inner() (mamba_inner.hpp), one autograd function that keeps x, z, x_proj's
// output and the scan's checkpoints for the backward, neither u nor delta. The tiny model's first layer with the switch
// on against it off: the output, the input's gradient and every parameter's gradient bit for bit (within the CUDA scan
// backward's own run-to-run noise: ssm_block_norm_check.hpp). mamba_inner() alone: the same bits as the differentiable
// ops without a conv bias, and the bytes its forward keeps, counted from the shapes. MambaRecomputeConvCpu: fp32 (the
// LibTorch reference scan). MambaRecomputeConvCuda (label gpu; skipped without a GPU): bf16 and fp32 through the fused
// kernels.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "channel_major_products.hpp"
#include "cpu_live_bytes.hpp"
#include "mamba_inner.hpp"
#include "mamba_test_support.hpp"
#include "scoped_variable.hpp"
#include "selective_scan.hpp"
#include "ssm_block_norm_check.hpp"

#ifdef TRIAX_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

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
// The bytes the first layer of `model` keeps for its backward beyond its output.
int64_t kept_by_layer(const std::shared_ptr<MambaModel>& model) {
  std::shared_ptr<triax::CausalLmLayer> layer;
  for (const auto& module : model->modules(/*include_self=*/false))
    if ((layer = std::dynamic_pointer_cast<triax::CausalLmLayer>(module))) break;
  if (!layer) {
    ADD_FAILURE() << "no layer";
    return 0;
  }
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

int64_t kept_by_forward(bool recompute) {
  std::shared_ptr<MambaModel> model;
  first_layer(recompute, tiny_model_context(), model);
  return kept_by_layer(model);
}

// mamba_inner()'s operands at b, d, s, state n, dt_rank r, d_conv taps, drawn from `seed`; the
// weights are leaves that require gradients.
struct InnerCase {
  int64_t batch, channels, length, state, dt_rank;
  at::Tensor x, z;
  triax::mamba::MambaInnerWeights weights;
};

InnerCase inner_case(int64_t b, int64_t d, int64_t s, int64_t n, int64_t r, int64_t taps, bool conv_bias,
                     c10::ScalarType dtype, c10::Device device) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(11);
  auto draw = [&](at::IntArrayRef shape, double scale, c10::ScalarType type) {
    return (at::randn(shape, generator, at::kFloat) * scale).to(device, type).requires_grad_(true);
  };
  InnerCase c{b, d, s, n, r, draw({b, d, s}, 1.0, dtype), draw({b, d, s}, 1.0, dtype), {}};
  c.weights.conv_weight = draw({d, taps}, 0.5, dtype);
  if (conv_bias) c.weights.conv_bias = draw({d}, 0.5, dtype);
  c.weights.x_proj_weight = draw({r + 2 * n, d}, 0.2, dtype);
  c.weights.dt_proj_weight = draw({d, r}, 0.5, dtype);
  c.weights.A = (-at::exp(at::randn({d, n}, generator, at::kFloat) * 0.5)).to(device).requires_grad_(true);
  c.weights.D = draw({d}, 1.0, at::kFloat);
  c.weights.delta_bias = draw({d}, 0.5, at::kFloat);
  return c;
}

std::vector<at::Tensor> leaves_of(const InnerCase& c) {
  const triax::mamba::MambaInnerWeights& w = c.weights;
  std::vector<at::Tensor> leaves{c.x, c.z, w.conv_weight, w.x_proj_weight, w.dt_proj_weight, w.A, w.D, w.delta_bias};
  if (w.conv_bias.defined()) leaves.push_back(w.conv_bias);
  return leaves;
}

// y, then the gradient of sum(grad_y * y) for each leaf, through `run`.
std::vector<at::Tensor> output_and_gradients(const InnerCase& c, const at::Tensor& grad_y,
                                             const std::function<at::Tensor()>& run) {
  const at::Tensor y = run();
  std::vector<at::Tensor> results{y.detach()};
  for (const at::Tensor& g : torch::autograd::grad({y}, leaves_of(c), {grad_y})) results.push_back(g);
  return results;
}

// The mixer's composition of the differentiable ops (MambaMixer::conv_and_scan) at tp 1.
at::Tensor differentiable_ops(const InnerCase& c) {
  const triax::mamba::MambaInnerWeights& w = c.weights;
  const at::Tensor u = triax::mamba::causal_conv1d(c.x, w.conv_weight, w.conv_bias, /*silu=*/true);
  const at::Tensor projected =
      triax::mamba::sum_over_channels(triax::mamba::channel_major_product(w.x_proj_weight, u), {});
  return triax::mamba::selective_scan(triax::mamba::scan_operands(u, projected, c.z, w));
}

// The bytes mamba_inner()'s forward keeps beyond its output: x and z made for it and dropped by
// the caller after, so that only its own references hold them. `live` reads the allocator.
int64_t kept_by_inner(const InnerCase& c, const std::function<int64_t()>& live) {
  const int64_t before = live();
  at::Tensor x = c.x.detach().clone().requires_grad_(true), z = c.z.detach().clone().requires_grad_(true);
  const at::Tensor y = triax::mamba::mamba_inner(x, z, c.weights, {});
  x.reset();
  z.reset();
  const int64_t kept = live() - before - static_cast<int64_t>(y.nbytes());
  y.sum().backward();  // the backward still runs from what was kept
  EXPECT_TRUE(c.weights.x_proj_weight.grad().defined());
  return kept;
}

// x and z, x_proj's output [b, r + 2n, s] in x's dtype and, where the kernels ran, the scan's
// checkpoints [b, d, ceil(s / 32), n] fp32: not u, not delta (each [b, d, s] in x's dtype).
int64_t expected_kept(const InnerCase& c, bool checkpoints) {
  const int64_t element = c.x.element_size(), activation = c.batch * c.channels * c.length * element;
  const int64_t projected = c.batch * (c.dt_rank + 2 * c.state) * c.length * element;
  const int64_t checkpoint_bytes = checkpoints ? c.batch * c.channels * ((c.length + 31) / 32) * c.state * 4 : 0;
  return 2 * activation + projected + checkpoint_bytes;
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

// ssm_cfg.recompute_conv: true selects mamba_inner() as the switch does (the switch unset), and the
// switch set to 0 overrides the key: the bytes the layer's forward keeps say which path ran.
TEST(MambaRecomputeConvCpu, TheConfigKeySelectsItAndTheSwitchOverridesIt) {
  const int64_t off = kept_by_forward(false), on = kept_by_forward(true);
  ASSERT_GT(off, on);
  auto kept_with_key = [](const char* setting) {
    const ScopedVariable variable("TRIAX_MAMBA_RECOMPUTE_CONV", setting);
    std::string yaml = tiny_yaml(false);
    const std::string ssm_end = "expand: 2}";
    yaml.replace(yaml.find(ssm_end), ssm_end.size(), "expand: 2, recompute_conv: true}");
    return kept_by_layer(build(yaml));
  };
  EXPECT_EQ(kept_with_key(nullptr), on);
  EXPECT_EQ(kept_with_key("0"), off);
}

// mamba_inner() without a conv bias (the layer test has one) against the differentiable ops, fp32
// and fp64: the same bits.
TEST(MambaRecomputeConvCpu, InnerMatchesTheDifferentiableOps) {
  for (c10::ScalarType dtype : {at::kFloat, at::kDouble}) {
    SCOPED_TRACE(c10::toString(dtype));
    const InnerCase c = inner_case(2, 12, 45, 5, 3, 4, /*conv_bias=*/false, dtype, c10::kCPU);
    const at::Tensor grad_y = at::randn({2, 12, 45}, at::TensorOptions().dtype(dtype));
    const std::vector<at::Tensor> inner =
        output_and_gradients(c, grad_y, [&] { return triax::mamba::mamba_inner(c.x, c.z, c.weights, {}); });
    const std::vector<at::Tensor> ops = output_and_gradients(c, grad_y, [&] { return differentiable_ops(c); });
    ASSERT_EQ(inner.size(), ops.size());
    for (size_t i = 0; i < ops.size(); ++i) EXPECT_TRUE(at::equal(inner[i], ops[i])) << "result " << i;
  }
}

// Its forward keeps x, z and x_proj's output, exactly: u or delta kept would add 2 * 12 * 45 * 4
// bytes each.
TEST(MambaRecomputeConvCpu, InnerKeepsXZAndProjected) {
  const InnerCase c = inner_case(2, 12, 45, 5, 3, 4, /*conv_bias=*/true, at::kFloat, c10::kCPU);
  CpuLiveBytes live;
  EXPECT_EQ(kept_by_inner(c, [&] { return live.bytes(); }), expected_kept(c, /*checkpoints=*/false));
}

TEST(MambaRecomputeConvCuda, SwitchChangesNoBit) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  for (c10::ScalarType dtype : {at::kBFloat16, at::kFloat})
    expect_switch_changes_no_bit(dtype, c10::Device(c10::kCUDA, 0));
}

// On the kernels its forward keeps x, z, x_proj's output and the scan's checkpoints, exactly
// (every size a multiple of the caching allocator's 512-byte rounding).
TEST(MambaRecomputeConvCuda, InnerKeepsXZProjectedAndCheckpoints) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
#ifdef TRIAX_WITH_CUDA
  auto live = [] {
    return c10::cuda::CUDACachingAllocator::getDeviceStats(0)
        .allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
        .current;
  };
  for (c10::ScalarType dtype : {at::kBFloat16, at::kFloat}) {
    SCOPED_TRACE(c10::toString(dtype));
    const InnerCase c = inner_case(2, 64, 256, 16, 4, 4, /*conv_bias=*/true, dtype, c10::Device(c10::kCUDA, 0));
    kept_by_inner(c, live);  // first: the GEMMs' workspaces, which stay allocated
    for (const at::Tensor& leaf : leaves_of(c)) leaf.mutable_grad().reset();
    EXPECT_EQ(kept_by_inner(c, live), expected_kept(c, /*checkpoints=*/true));
  }
#endif
}

}  // namespace mamba_recompute_conv_test
