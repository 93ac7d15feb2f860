// The SSD over the convolution's output whole (ssd_chunked_packed, ssd.hpp): its outputs and the
// gradients of xBC (x, B and C written into one tensor, the returned x's gradient added into x's),
// dt, A and the initial state against ssd_chunked over xBC split into x, B and C, bit for bit on
// the CPU (fp32 and bf16 operands, one group and two, lengths the chunk does and does not divide);
// one bf16 mixer step with TRIAX_MAMBA2_SSD_PACKED_GRADIENT on and off, bit for bit on the CPU;
// and (Mamba2SsdCuda, with a GPU) both on CUDA, within a tolerance (the fused kernels' sums), and
// the summed rows kernel that stores x's gradient there against LibTorch's add, bit for bit.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <vector>

#include "mamba2_test_support.hpp"
#include "model_reference_support.hpp"
#include "scoped_variable.hpp"
#include "ssd.hpp"

#ifdef TRIAX_WITH_CUDA
#include "ssd_cuda.hpp"
#endif

namespace {

using triax::mamba2::PackedSsdInputs;
using triax::test::max_relative_diff;

struct PackedCase {
  int64_t batch, length, groups, heads_per_group, head_dim, state, chunk;
  bool initial_state;
};

struct Draws {
  at::Tensor xBC, dt, A, initial_state;            // the inputs
  at::Tensor weight_y, weight_state, weight_skip;  // the loss's weights of y, the final state and x (the D skip)
};

Draws draw(const PackedCase& c, at::ScalarType operand, at::Device device) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(c.length * 7 + c.groups);
  auto randn = [&](at::IntArrayRef sizes) { return at::randn(sizes, g, at::kFloat).to(device); };
  const int64_t heads = c.groups * c.heads_per_group, width = c.heads_per_group * c.head_dim + 2 * c.state;
  Draws d;
  d.xBC = randn({c.batch, c.length, c.groups, width}).to(operand);
  d.dt = at::softplus(randn({c.batch, c.length, heads}) - 1.0);
  d.A = -at::exp(randn({heads}));
  if (c.initial_state) d.initial_state = randn({c.batch, heads, c.head_dim, c.state});
  d.weight_y = randn({c.batch, c.length, heads, c.head_dim});
  d.weight_state = randn({c.batch, heads, c.head_dim, c.state});
  d.weight_skip = randn({c.batch, c.length, heads, c.head_dim}).to(operand);
  return d;
}

// y, the final state, then the gradients of xBC, dt, A (and the initial state) of
// sum(y w_y) + sum(final w_state) + sum(x w_skip), through the packed function or the split inputs.
std::vector<at::Tensor> run(const PackedCase& c, const Draws& d, bool packed) {
  const at::Tensor xBC = d.xBC.clone().requires_grad_(true), dt = d.dt.clone().requires_grad_(true);
  const at::Tensor A = d.A.clone().requires_grad_(true);
  const at::Tensor initial = d.initial_state.defined() ? d.initial_state.clone().requires_grad_(true) : at::Tensor();
  at::Tensor x, y, state;
  if (packed) {
    const auto out = triax::mamba2::ssd_chunked_packed(PackedSsdInputs{xBC, dt, A, initial, c.state}, c.chunk);
    x = out.x, y = out.y, state = out.final_state;
  } else {
    const std::vector<at::Tensor> parts = xBC.split_with_sizes({xBC.size(3) - 2 * c.state, c.state, c.state}, 3);
    x = parts[0].reshape({c.batch, c.length, -1, c.head_dim});
    const auto out = triax::mamba2::ssd_chunked({x, dt, A, parts[1], parts[2], initial}, c.chunk);
    y = out.y, state = out.final_state;
  }
  ((y * d.weight_y).sum() + (state * d.weight_state).sum() + (x * d.weight_skip).sum().to(at::kFloat)).backward();
  std::vector<at::Tensor> result{y.detach(), state.detach(), xBC.grad(), dt.grad(), A.grad()};
  if (initial.defined()) result.push_back(initial.grad());
  return result;
}

const std::vector<PackedCase> kCases{{2, 64, 1, 4, 8, 16, 16, true},  // one group, whole chunks: x a view of xBC
                                     {2, 37, 2, 2, 4, 8, 16, false},  // two groups, a padded chunk
                                     {1, 40, 1, 3, 8, 4, 64, true}};  // one chunk longer than the sequence

TEST(Mamba2SsdPacked, OutputsAndGradientsEqualTheSplitInputsBitForBit) {
  for (const PackedCase& c : kCases) {
    for (at::ScalarType operand : {at::kFloat, at::kBFloat16}) {
      const Draws d = draw(c, operand, at::kCPU);
      const std::vector<at::Tensor> split = run(c, d, false), packed = run(c, d, true);
      ASSERT_EQ(split.size(), packed.size());
      for (size_t i = 0; i < split.size(); ++i) {
        ASSERT_TRUE(packed[i].defined()) << i;
        EXPECT_EQ(packed[i].scalar_type(), split[i].scalar_type()) << i;
        EXPECT_TRUE(at::equal(packed[i], split[i]))
            << "tensor " << i << " (y, state, xBC, dt, A, initial), length " << c.length << ", "
            << c10::toString(operand) << ": " << max_relative_diff(packed[i], split[i]);
      }
    }
  }
}

// One bf16 mixer's output and the gradients of its input and parameters on the CPU, with
// `value` for TRIAX_MAMBA2_SSD_PACKED_GRADIENT. One group of 4 heads, [2, 64, 32] in.
std::vector<at::Tensor> mixer_step(const char* value) {
  const ScopedVariable setting("TRIAX_MAMBA2_SSD_PACKED_GRADIENT", value);
  return mamba2_test::output_and_gradients(mamba2_test::bf16_mixer_step(
      "hidden_size: 32\nnum_hidden_layers: 1\nvocab_size: 30\nnum_heads: 4\nhead_dim: 16\nstate_size: 16\n"
      "n_groups: 1\nchunk_size: 16\n",
      at::kCPU, {2, 64, 32}, 9));
}

TEST(Mamba2SsdPacked, AMixerStepIsTheSameWithTheSwitchOnAndOff) {
  const std::vector<at::Tensor> off = mixer_step("0"), on = mixer_step("1");
  ASSERT_EQ(on.size(), off.size());
  for (size_t i = 0; i < off.size(); ++i) {
    ASSERT_TRUE(on[i].defined() && off[i].defined()) << "tensor " << i;
    EXPECT_TRUE(at::equal(on[i], off[i])) << "tensor " << i << ": " << max_relative_diff(on[i], off[i]);
  }
}

// On CUDA (bf16 and fp32 operands, the fused chunk scan's shapes and odd ones): the packed
// function against the split inputs within 1e-3 of the largest value, and a bf16 mixer step
// (mamba2_test::cuda_mixer_step) with the switch on and off within 5e-3 (a bf16 rounding of a
// sum taken in another order, no more).
TEST(Mamba2SsdCuda, PackedGradientMatchesTheSplitInputs) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  std::vector<PackedCase> cases = kCases;
  cases.push_back({2, 512, 1, 4, 64, 128, 256, false});  // the 780m layout, small
  for (const PackedCase& c : cases) {
    for (at::ScalarType operand : {at::kFloat, at::kBFloat16}) {
      const Draws d = draw(c, operand, at::kCUDA);
      const std::vector<at::Tensor> split = run(c, d, false), packed = run(c, d, true);
      ASSERT_EQ(split.size(), packed.size());
      for (size_t i = 0; i < split.size(); ++i)
        EXPECT_LT(max_relative_diff(packed[i].cpu(), split[i].cpu()), 1e-3)
            << "tensor " << i << ", length " << c.length << ", " << c10::toString(operand);
    }
  }
  mamba2_test::expect_cuda_mixer_step_switch_within("TRIAX_MAMBA2_SSD_PACKED_GRADIENT", 5e-3);
}

// The summed rows kernel (TRIAX_MAMBA2_SUMMED_ROWS_KERNEL), which stores x's gradient plus the
// returned x's into x's slot of the packed gradient, against the LibTorch add_out it replaces, bit
// for bit: into the slot of a [b, l, G, R P + 2 N] tensor (the rest untouched), the addend
// contiguous and a strided view, bf16, fp16 and fp32; where it does not apply; and the packed
// function's outputs and gradients with the kernel on and off.
TEST(Mamba2SsdCuda, SummedRowsKernelGivesLibTorchsBitsInThePackedGradient) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
#ifdef TRIAX_WITH_CUDA
  namespace ssd = triax::mamba2::ssd;
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(71);
  const int64_t b = 2, l = 96, groups = 2, x_width = 3 * 64, state = 32;
  for (at::ScalarType type : {at::kBFloat16, at::kHalf, at::kFloat}) {
    auto draw_on_cuda = [&](at::IntArrayRef sizes) { return at::randn(sizes, g, at::kFloat).to(at::kCUDA, type); };
    const at::Tensor packed = draw_on_cuda({b, l, groups, x_width + 2 * state}),
                     terms = draw_on_cuda({b, l, groups, x_width});
    const at::Tensor contiguous = draw_on_cuda({b, l, groups, x_width});
    const at::Tensor strided = draw_on_cuda({b, l, groups, 2 * x_width}).narrow(-1, x_width, x_width);
    for (const at::Tensor& addend : {contiguous, strided}) {
      at::Tensor expected = packed.clone(), got = packed.clone();
      at::Tensor expected_slot = expected.narrow(-1, 0, x_width), got_slot = got.narrow(-1, 0, x_width);
      at::add_out(expected_slot, terms, addend);
      ASSERT_TRUE(ssd::summed_rows_kernel_applies(got_slot, terms, addend)) << c10::toString(type);
      ssd::summed_rows_cuda(got_slot, terms, addend);
      EXPECT_TRUE(at::equal(got, expected)) << c10::toString(type) << ", addend contiguous " << addend.is_contiguous();
    }
    const at::Tensor odd_slot = packed.narrow(-1, 0, x_width - 4);  // rows not whole 16-byte vectors
    EXPECT_FALSE(ssd::summed_rows_kernel_applies(odd_slot, terms.narrow(-1, 0, x_width - 4),
                                                 contiguous.narrow(-1, 0, x_width - 4)));
    const ScopedVariable off("TRIAX_MAMBA2_SUMMED_ROWS_KERNEL", "0");
    EXPECT_FALSE(ssd::summed_rows_kernel_applies(packed.narrow(-1, 0, x_width), terms, contiguous));
  }
  std::vector<PackedCase> cases = kCases;
  cases.push_back({2, 512, 1, 4, 64, 128, 256, false});  // the 780m layout, small
  for (const PackedCase& c : cases) {
    for (at::ScalarType operand : {at::kFloat, at::kBFloat16}) {
      const Draws d = draw(c, operand, at::kCUDA);
      auto packed_run = [&](const char* kernel) {
        const ScopedVariable setting("TRIAX_MAMBA2_SUMMED_ROWS_KERNEL", kernel);
        return run(c, d, true);
      };
      const std::vector<at::Tensor> libtorch = packed_run("0"), kernel = packed_run("1");
      for (size_t i = 0; i < libtorch.size(); ++i)
        EXPECT_TRUE(at::equal(kernel[i], libtorch[i])) << "tensor " << i << " (y, state, xBC, dt, A, initial), length "
                                                       << c.length << ", " << c10::toString(operand);
    }
  }
#endif
}

}  // namespace
