// The chunk states on tensor cores (TRIAX_MAMBA2_CHUNK_STATES_KERNEL, ssd_chunk_states*.cu) against
// the path they replace (weighted_xdt stored, then cuBLAS), on the mamba2-780m layer's chunk shape
// (48 heads of 64, state 128, chunks of 256) and on odd ones (lengths the chunk does not divide,
// several groups, head_dim 128, state 64, fp16). Skipped without a GPU (suite Mamba2SsdCuda).
//
// Both paths multiply the same 16-bit operands (the kernels scale xdt by w in fp32 and round to the
// operand type as weighted_xdt does; the products of two 16-bit values are exact in fp32) and sum
// them in fp32 in different orders. As in mamba2_chunk_scan_v3_test.cpp: reordering a sum of K
// terms moves it by at most 2 (K - 1) u sum|terms| (u = 2^-24), and the tests allow twice that
// (tensor cores' sums need not round as IEEE additions do), sum|terms| computed in fp64 from the
// operands' magnitudes. The kernels' outputs directly:
//   states (K = q), d_B (K = r p: the group's heads and channels), d_xdt += dweighted w (K = n,
//   then one rounding of the sum: 4 u of the magnitudes more) and the weights' gradient
//   w sum_p dweighted xdt (each dweighted within its bound, then the sum over p reordered).
// Then the SSD's y, final state and every input's gradient (ssd_chunked, ssd_chunked_packed) and a
// bf16 mixer step with the switch on against off, within the fused-backward tests' 5e-3 of the
// largest value.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "mamba2_ssd_case.hpp"
#include "mamba2_test_support.hpp"
#include "model_reference_support.hpp"
#include "scoped_variable.hpp"
#include "ssd.hpp"

#ifdef TRIAX_WITH_CUDA
#include "ssd_chunk_states_cuda.hpp"
#include "ssd_chunks.hpp"
#endif

namespace mamba2_chunk_states_test {  // named: the tests compile in unity batches

using triax::mamba2::SsdInputs;

constexpr const char* kSwitch = "TRIAX_MAMBA2_CHUNK_STATES_KERNEL";

at::Tensor f64(const at::Tensor& t) { return t.to(at::kDouble).cpu(); }

#ifdef TRIAX_WITH_CUDA
namespace ssd = triax::mamba2::ssd;

using Case = triax::test::SsdCase;
using triax::test::expect_within;
using triax::test::name_of;

const std::vector<Case>& cases() {
  static const std::vector<Case> all{{2, 512, 48, 64, 1, 128, 256, at::kBFloat16, false},
                                     {1, 333, 4, 64, 2, 64, 128, at::kBFloat16, true},
                                     {2, 300, 6, 128, 1, 128, 256, at::kBFloat16, true},
                                     {1, 200, 3, 128, 3, 64, 64, at::kHalf, false},
                                     {1, 700, 8, 64, 1, 128, 256, at::kHalf, true}};
  return all;
}

// Inputs as the mixer passes them on CUDA: x, B and C in the operand type, the rest fp32; steps and
// decay rates of a trained model's size (dt = softplus(N(0,1) - 3), A in [-16, -1]).
SsdInputs cuda_inputs(const Case& c, uint64_t seed) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
  const at::TensorOptions f32 = at::TensorOptions().dtype(at::kFloat);
  const int64_t H = c.groups * c.heads;
  SsdInputs in;
  in.x = at::randn({c.batch, c.length, H, c.head_dim}, g, f32).to(at::kCUDA, c.operand);
  in.dt = at::softplus(at::randn({c.batch, c.length, H}, g, f32) - 3.0).to(at::kCUDA);
  in.A = -at::linspace(1.0, 16.0, H, f32).to(at::kCUDA);
  in.B = at::randn({c.batch, c.length, c.groups, c.state}, g, f32).to(at::kCUDA, c.operand);
  in.C = at::randn({c.batch, c.length, c.groups, c.state}, g, f32).to(at::kCUDA, c.operand);
  if (c.initial) in.initial_state = at::randn({c.batch, H, c.head_dim, c.state}, g, f32).to(at::kCUDA);
  return in;
}

// Twice the reordering bound of K terms, per unit of sum|terms|.
double reordering(int64_t terms) { return 2.0 * 2.0 * static_cast<double>(terms - 1) * std::ldexp(1.0, -24); }

void expect_kernels_agree(const Case& c, uint64_t seed) {
  const ScopedVariable on(kSwitch, "1");
  const ssd::Chunks k = ssd::into_chunks(cuda_inputs(c, seed), c.chunk);
  ASSERT_TRUE(ssd::chunk_states_kernel_applies(k)) << name_of(c);
  const at::Tensor w = ssd::to_chunk_end(k);
  const at::Tensor weighted = ssd::weighted_xdt(k, ssd::per_position(w));  // [b, c, g, q, r p]

  // The forward: (xdt o w)^T B.
  const at::Tensor states = ssd::chunk_states_cuda(k, w);
  const at::Tensor cublas = ssd::chunk_states(k, ssd::ChunkWeights{w, weighted});
  const at::Tensor B_abs = f64(k.B).abs(), weighted_abs = f64(weighted).abs();
  expect_within(states, cublas, reordering(k.q) * at::matmul(weighted_abs.transpose(-1, -2), B_abs),
                name_of(c) + ", states");

  // The backward from a chunk states' gradient in the operand type (as the state passing stores it)
  // onto a d_xdt already holding the diagonal term.
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed + 1);
  const at::Tensor ds = at::randn({k.b, k.c, k.g, k.r * k.p, k.n}, g, at::kFloat).to(at::kCUDA, k.operand);
  const at::Tensor d_xdt_before = at::randn({k.b, k.c, k.g, k.q, k.r, k.p}, g, at::kFloat).to(at::kCUDA);
  at::Tensor d_xdt = d_xdt_before.clone();
  const ssd::ChunkStatesGradients fused = ssd::chunk_states_backward_cuda(k, w, ds, d_xdt);

  const at::Tensor B_grad = ssd::product(weighted, ds, k.type);
  const at::Tensor dweighted = ssd::product(k.B, ds.transpose(-1, -2), k.type).view({k.b, k.c, k.g, k.q, k.r, k.p});
  const at::Tensor w_positions = ssd::per_position(w);  // [b, c, g, q, r, 1]
  const at::Tensor xdt = k.xdt.view({k.b, k.c, k.g, k.q, k.r, k.p});
  const at::Tensor d_xdt_cublas = d_xdt_before + dweighted * w_positions;
  const at::Tensor to_end_cublas = (dweighted * xdt).sum(-1).transpose(3, 4) * w;

  const at::Tensor ds_abs = f64(ds).abs(), w64 = f64(w_positions);
  expect_within(fused.B, B_grad, reordering(k.r * k.p) * at::matmul(weighted_abs, ds_abs), name_of(c) + ", d_B");
  const at::Tensor dweighted_terms = at::matmul(B_abs, ds_abs.transpose(-1, -2)).view(d_xdt.sizes());  // sum|terms|
  const double u = std::ldexp(1.0, -24);
  expect_within(d_xdt, d_xdt_cublas,
                reordering(k.n) * dweighted_terms * w64 + 4.0 * u * (f64(d_xdt_before).abs() + dweighted_terms * w64),
                name_of(c) + ", d_xdt");
  const at::Tensor dot_terms = (dweighted_terms * f64(xdt).abs()).sum(-1).transpose(3, 4) * f64(w);
  expect_within(fused.to_end, to_end_cublas, (reordering(k.n + k.p) + 4.0 * u) * dot_terms,
                name_of(c) + ", the weights' gradient");
}

// y, the final state and every input's gradient of sum(y v) + sum(final u) through ssd_chunked
// (packed: ssd_chunked_packed over xBC) with the switch at `value`.
std::vector<at::Tensor> ssd_outputs_and_gradients(const SsdInputs& given, const Case& c, bool packed,
                                                  const char* value) {
  const ScopedVariable setting(kSwitch, value);
  SsdInputs in = given;
  std::vector<at::Tensor*> leaves = {&in.x, &in.dt, &in.A, &in.B, &in.C};
  if (in.initial_state.defined()) leaves.push_back(&in.initial_state);
  for (at::Tensor* t : leaves) *t = t->detach().requires_grad_(true);
  at::Tensor y, final_state, xBC;
  if (packed) {
    const int64_t b = c.batch, l = c.length;
    xBC = at::cat({in.x.detach().reshape({b, l, c.groups, -1}), in.B.detach(), in.C.detach()}, 3).requires_grad_(true);
    const triax::mamba2::PackedSsdOutputs out =
        triax::mamba2::ssd_chunked_packed({xBC, in.dt, in.A, in.initial_state, c.state}, c.chunk);
    y = out.y, final_state = out.final_state;
  } else {
    const triax::mamba2::SsdOutputs out = triax::mamba2::ssd_chunked(in, c.chunk);
    y = out.y, final_state = out.final_state;
  }
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(7);
  const at::Tensor v = at::randn(y.sizes(), g, at::kFloat).to(y.device());
  const at::Tensor u = at::randn(final_state.sizes(), g, at::kFloat).to(y.device());
  ((y.to(at::kFloat) * v).sum() + (final_state * u).sum()).backward();
  std::vector<at::Tensor> result{y.detach(), final_state.detach()};
  if (packed) result.push_back(xBC.grad());
  for (at::Tensor* t : leaves)
    if (t->grad().defined()) result.push_back(t->grad());
  return result;
}

void expect_ssd_agrees(const Case& c, bool packed) {
  const SsdInputs in = cuda_inputs(c, 31);
  {
    const ScopedVariable on(kSwitch, "1");
    ASSERT_TRUE(ssd::chunk_states_kernel_applies(ssd::into_chunks(in, c.chunk))) << name_of(c);
  }
  const std::vector<at::Tensor> off = ssd_outputs_and_gradients(in, c, packed, "0");
  const std::vector<at::Tensor> on = ssd_outputs_and_gradients(in, c, packed, "1");
  ASSERT_EQ(on.size(), off.size());
  for (size_t i = 0; i < on.size(); ++i)
    EXPECT_LT(triax::test::max_relative_diff(f64(on[i]), f64(off[i])), 5e-3)
        << name_of(c) << (packed ? ", packed" : "") << ", tensor " << i;
}
#endif

TEST(Mamba2SsdCuda, ChunkStatesKernelsAgreeWithCuBlasWithinSummationOrder) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
#ifdef TRIAX_WITH_CUDA
  uint64_t seed = 11;
  for (const Case& c : cases()) expect_kernels_agree(c, seed += 2);
#endif
}

TEST(Mamba2SsdCuda, SsdWithChunkStatesKernelsAgreesWithTheCuBlasPath) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
#ifdef TRIAX_WITH_CUDA
  for (const Case& c : cases()) {
    expect_ssd_agrees(c, false);
    expect_ssd_agrees(c, true);
  }
  // Shapes the kernels refuse (head_dim 32, state 16) take the cuBLAS path with the switch on.
  const ScopedVariable on(kSwitch, "1");
  const Case refused{1, 128, 2, 32, 1, 16, 64, at::kBFloat16, false};
  EXPECT_FALSE(ssd::chunk_states_kernel_applies(ssd::into_chunks(cuda_inputs(refused, 5), refused.chunk)));
  EXPECT_NO_THROW(ssd_outputs_and_gradients(cuda_inputs(refused, 5), refused, false, "1"));
#endif
}

// A bf16 mixer step (4 heads of 64 in 2 groups, state 64, chunks of 64, a length they do not
// divide) with the switch on against off.
TEST(Mamba2SsdCuda, MixerStepWithChunkStatesKernelsAgrees) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  auto step = [](const char* value) {
    const ScopedVariable setting(kSwitch, value);
    return mamba2_test::output_and_gradients(mamba2_test::bf16_mixer_step(
        "hidden_size: 128\nnum_hidden_layers: 1\nvocab_size: 30\nnum_heads: 4\nhead_dim: 64\n"
        "state_size: 64\nn_groups: 2\nchunk_size: 64\n",
        at::kCUDA, {2, 200, 128}, 5));
  };
  const std::vector<at::Tensor> off = step("0"), on = step("1");
  ASSERT_EQ(on.size(), off.size());
  for (size_t i = 0; i < off.size(); ++i) {
    ASSERT_TRUE(on[i].defined() && off[i].defined()) << "tensor " << i;
    EXPECT_LT(triax::test::max_relative_diff(f64(on[i]), f64(off[i])), 5e-3) << "tensor " << i;
  }
}

}  // namespace mamba2_chunk_states_test
