// The fused chunk scan's third forward kernel (TRIAX_MAMBA2_CHUNK_SCAN_KERNEL=v3, mma.sync with
// the masked scores in registers; ssd_chunk_scan_v3.cu) against the WMMA kernel it may replace
// (unset or v2) and against the fp64 composition, on the mamba2-780m layer's chunk shape (48
// heads of 64, state 128, chunks of 256) and on other shapes the kernels take. Skipped without a
// GPU (suite Mamba2SsdCuda, label gpu).
//
// Tolerance against the WMMA kernel: both sum the same products in fp32 (a product of two 16-bit
// operands is exact in fp32; M is rounded to the operand type the same way, and S, the decays and
// the entering states are the same tensors), in different orders. Reordering a sum of K terms moves
// it by at most 2 (K - 1) u sum|terms| (u = 2^-24, each order within (K - 1) u of the exact sum),
// K <= n + q terms per output (the state's read-out, then the chunk's columns). sum|terms| is
// bounded element by element by the SSD of |x|, |B|, |C| and |initial state| (every factor then
// non-negative), computed in fp64; the tests allow twice the bound (tensor cores' fp32 sums need
// not round as IEEE additions do). Where y is in the operand type, one rounding more: one unit in
// the last place of the larger value (at most 2^-7 |y| in bf16, 2^-10 |y| or 2^-24 in fp16) on top.
//
// The backward's columns kernel v3 (=v3-columns, and =v3; =v3-forward keeps the WMMA one) against
// the WMMA kernel, its outputs directly (chunk_scan_backward_cuda, all fp32): d_xdt_j = sum_i M_ij
// dy_i (at most q terms) and the decays' gradient, sums over i and j of G = dM L S with dM = dy .
// xdt over p, so that each G term differs by its own reordering over p. Allowed, element by
// element: twice 2 (q + p) u times the sum of the terms' magnitudes (fp64, from |M|, |dy|, |xdt|);
// with v3-columns the scores' gradient (the same scores kernel) bit for bit.
// The scores kernel v3 (=v3) against the WMMA one (=v3-columns): dS_ij = sum over the r heads of
// L_ij dM_ij, dM over p, the heads in the same order: p + r terms a value each kernel sums in
// fp32, so twice 2 (p + r + 1) u times sum_h L |dy_i| . |xdt_j| (fp64). Off the diagonal tile v3
// takes L as a product of two exps (each within 2 ulps, their arguments rounded once, the product
// once more), the WMMA kernel as one: the two L differ by at most 14 u (L <= 1), allowed twice, 32 u
// times sum_h |dy_i| . |xdt_j| where i >= j. Plus one unit in the last place of the operand type
// (dS is rounded to it). v3 run twice gives the same bits. Then every
// input's gradient through the SSD with v3 (and with v3-columns) against the LibTorch
// composition, within the other fused-backward tests' 5e-3 (or 1.5 times v2's distance from it,
// where that is larger on these inputs).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "mamba2_ssd_case.hpp"
#include "model_reference_support.hpp"
#include "scoped_variable.hpp"
#include "ssd.hpp"

#ifdef TRIAX_WITH_CUDA
#include "ssd_chunks.hpp"
#include "ssd_cuda.hpp"
#endif

namespace {

using triax::mamba2::ssd_chunked;
using triax::mamba2::SsdInputs;

using Case = triax::test::SsdCase;
using triax::test::expect_within;
using triax::test::name_of;

SsdInputs exact_inputs(const Case& c, uint64_t seed) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
  const at::TensorOptions f64 = at::TensorOptions().dtype(at::kDouble);
  const int64_t H = c.groups * c.heads;
  SsdInputs in;
  in.x = at::randn({c.batch, c.length, H, c.head_dim}, g, f64).to(c.operand).to(at::kDouble);
  in.dt = at::softplus(at::randn({c.batch, c.length, H}, g, f64) - 3.0);
  in.A = -at::linspace(1.0, 16.0, H, f64);
  in.B = at::randn({c.batch, c.length, c.groups, c.state}, g, f64).to(c.operand).to(at::kDouble);
  in.C = at::randn({c.batch, c.length, c.groups, c.state}, g, f64).to(c.operand).to(at::kDouble);
  if (c.initial) in.initial_state = at::randn({c.batch, H, c.head_dim, c.state}, g, f64);
  return in;
}

// The inputs as the mixer passes them on CUDA: x, B, C in the operand type, the rest fp32.
SsdInputs on_cuda(const SsdInputs& exact, c10::ScalarType operand) {
  SsdInputs in = exact;
  for (at::Tensor* t : {&in.x, &in.dt, &in.A, &in.B, &in.C, &in.initial_state})
    if (t->defined()) *t = t->to(at::kCUDA, at::kFloat);
  for (at::Tensor* t : {&in.x, &in.B, &in.C}) *t = t->to(operand);
  return in;
}

// y by the fused chunk scan's forward `kernel` ("v2", "v3"), in fp32 or the operand type.
at::Tensor fused_y(const SsdInputs& in, const Case& c, const char* kernel, bool y_in_operand_type) {
  const ScopedVariable scan("TRIAX_MAMBA2_CHUNK_SCAN", "1");
  const ScopedVariable generation("TRIAX_MAMBA2_CHUNK_SCAN_KERNEL", kernel);
  const ScopedVariable y_type("TRIAX_MAMBA2_Y_IN_OPERAND_TYPE", y_in_operand_type ? "1" : "0");
#ifdef TRIAX_WITH_CUDA
  namespace ssd = triax::mamba2::ssd;
  EXPECT_TRUE(ssd::chunk_scan_applies(ssd::into_chunks(in, c.chunk))) << name_of(c);
  EXPECT_EQ(ssd::chunk_scan_v3_switched_on(), std::string(kernel) == "v3") << kernel;
#endif
  const at::Tensor y = ssd_chunked(in, c.chunk).y;
  EXPECT_EQ(y.scalar_type(), y_in_operand_type ? c.operand : at::kFloat) << name_of(c);
  return y.to(at::kDouble).cpu();
}

// sum over an output's terms of |term|, element by element (fp64): the SSD of the inputs' magnitudes.
at::Tensor term_magnitudes(const SsdInputs& exact, int64_t chunk) {
  SsdInputs magnitudes = exact;
  for (at::Tensor* t : {&magnitudes.x, &magnitudes.B, &magnitudes.C, &magnitudes.initial_state})
    if (t->defined()) *t = t->abs();
  return ssd_chunked(magnitudes, chunk).y;
}

// |v3 - v2| within the reordering bound (file comment), plus one ulp of y's type where it is 16-bit.
void expect_within_summation_order(const at::Tensor& v3, const at::Tensor& v2, const at::Tensor& magnitudes,
                                   const Case& c, bool y_in_operand_type) {
  const double unit = std::ldexp(1.0, -24), terms = static_cast<double>(c.state + c.chunk);
  at::Tensor allowed = 2.0 * 2.0 * (terms - 1.0) * unit * magnitudes;
  if (y_in_operand_type) {  // an ulp of the larger (fp16's subnormals: 2^-24 apart)
    const double relative_ulp = std::ldexp(1.0, c.operand == at::kBFloat16 ? -7 : -10);
    allowed = allowed + relative_ulp * at::maximum(v3.abs(), v2.abs()) + (c.operand == at::kHalf ? unit : 0.0);
  }
  expect_within(v3, v2, allowed, name_of(c) + (y_in_operand_type ? ", y in the operand type" : ", fp32 y"));
}

// v3 against v2 (fp32 y and y in the operand type) and, fp32 y, against the fp64 composition on
// the same values within 1e-2 of the largest output (the bound of the other fused-scan tests).
void expect_v3_agrees(const Case& c, uint64_t seed) {
  const SsdInputs exact = exact_inputs(c, seed);
  const SsdInputs gpu = on_cuda(exact, c.operand);
  const at::Tensor magnitudes = term_magnitudes(exact, c.chunk);
  for (bool y_in_operand_type : {false, true}) {
    const at::Tensor v3 = fused_y(gpu, c, "v3", y_in_operand_type);
    const at::Tensor v2 = fused_y(gpu, c, "v2", y_in_operand_type);
    ASSERT_GT(v2.abs().max().item<double>(), 0.1) << name_of(c);
    expect_within_summation_order(v3, v2, magnitudes, c, y_in_operand_type);
    if (!y_in_operand_type) {
      EXPECT_LT(triax::test::max_relative_diff(v3, ssd_chunked(exact, c.chunk).y), 1e-2) << name_of(c);
    }
  }
}

// The 780m layer's chunks (q 256 -> four row tiles, n 128, 48 heads of 64, one group), shorter.
TEST(Mamba2SsdCuda, ChunkScanV3AgreesAtThe780mShape) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  expect_v3_agrees({2, 512, 48, 64, 1, 128, 256, at::kBFloat16, false}, 71);
  expect_v3_agrees({1, 512, 48, 64, 1, 128, 256, at::kBFloat16, true}, 72);
}

// Head dims 16, 32 and 128, state 64 and 16, lengths the chunk does not divide, several groups,
// chunks of 64 to 256 (one to four row tiles), fp16 operands, with and without an initial state.
TEST(Mamba2SsdCuda, ChunkScanV3AgreesOnOtherShapes) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  for (const Case& c :
       {Case{2, 300, 4, 32, 1, 128, 256, at::kBFloat16, true}, Case{1, 333, 4, 32, 2, 64, 128, at::kBFloat16, false},
        Case{2, 200, 2, 128, 1, 64, 192, at::kBFloat16, true}, Case{1, 333, 6, 128, 1, 128, 128, at::kHalf, false},
        Case{2, 200, 6, 16, 2, 16, 64, at::kBFloat16, true}, Case{1, 333, 3, 64, 3, 64, 128, at::kHalf, true},
        Case{1, 700, 8, 64, 1, 128, 256, at::kHalf, false}})
    expect_v3_agrees(c, 81);
}

#ifdef TRIAX_WITH_CUDA
namespace ssd = triax::mamba2::ssd;

ssd::ChunkScanGradients columns_backward(const ssd::Chunks& k, const at::Tensor& dy, const char* kernel) {
  const ScopedVariable scan("TRIAX_MAMBA2_CHUNK_SCAN", "1");
  const ScopedVariable generation("TRIAX_MAMBA2_CHUNK_SCAN_KERNEL", kernel);
  EXPECT_TRUE(ssd::chunk_scan_backward_applies(k));
  const std::string name = kernel;
  EXPECT_EQ(ssd::chunk_scan_columns_v3_switched_on(), name == "v3" || name == "v3-columns") << kernel;
  EXPECT_EQ(ssd::chunk_scan_scores_v3_switched_on(), name == "v3") << kernel;
  return ssd::chunk_scan_backward_cuda(k, dy);
}

void expect_columns_v3_agrees(const Case& c, uint64_t seed) {
  const SsdInputs gpu = on_cuda(exact_inputs(c, seed), c.operand);
  const ssd::Chunks k = ssd::into_chunks(gpu, c.chunk);
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed + 1);
  const at::Tensor dy = at::randn({k.b, k.c, k.g, k.q, k.r, k.p}, g, at::kDouble).to(at::kCUDA, c.operand);
  const ssd::ChunkScanGradients v2 = columns_backward(k, dy, "v2"), v3 = columns_backward(k, dy, "v3-columns");
  EXPECT_TRUE(at::equal(v3.scores, v2.scores)) << name_of(c);
  const ssd::ChunkScanGradients scores_v3 = columns_backward(k, dy, "v3");
  EXPECT_TRUE(at::equal(scores_v3.xdt, v3.xdt) && at::equal(scores_v3.decay, v3.decay)) << name_of(c);
  EXPECT_TRUE(at::equal(columns_backward(k, dy, "v3").scores, scores_v3.scores)) << name_of(c) << ": not deterministic";

  // The terms' magnitudes in fp64, per head [b, c, g, r, q(i), q(j)] and [b, c, g, r, q, p].
  const at::Tensor decay = k.decay.to(at::kDouble).cpu();
  const at::Tensor causal = at::ones({k.q, k.q}, decay.options().dtype(at::kBool)).tril();
  const at::Tensor L = (decay.unsqueeze(-1) - decay.unsqueeze(-2)).masked_fill(~causal, -INFINITY).exp();
  const at::Tensor C = k.C.to(at::kDouble).cpu(), B = k.B.to(at::kDouble).cpu();
  const at::Tensor M = (L * at::matmul(C, B.transpose(-1, -2)).unsqueeze(3)).abs();
  const at::Tensor dy_heads = dy.to(at::kDouble).cpu().abs().permute({0, 1, 2, 4, 3, 5});
  const at::Tensor x_heads =
      k.xdt.to(at::kDouble).cpu().abs().reshape({k.b, k.c, k.g, k.q, k.r, k.p}).permute({0, 1, 2, 4, 3, 5});
  const at::Tensor d_masked = at::matmul(dy_heads, x_heads.transpose(-1, -2));  // |dy| . |xdt|^T per head
  const at::Tensor G = d_masked * M;
  const double unit = std::ldexp(1.0, -24), bound = 2.0 * 2.0 * static_cast<double>(k.q + k.p) * unit;
  const at::Tensor xdt_terms = at::matmul(M.transpose(-1, -2), dy_heads).permute({0, 1, 2, 4, 3, 5});
  expect_within(v3.xdt, v2.xdt, bound * xdt_terms, name_of(c) + ", d_xdt");
  expect_within(v3.decay, v2.decay, bound * (G.sum(-1) + G.sum(-2)), name_of(c) + ", the decays' gradient");

  const at::Tensor wmma = v2.scores.to(at::kDouble).cpu(), mma = scores_v3.scores.to(at::kDouble).cpu();
  ASSERT_GT(wmma.abs().max().item<double>(), 0.1) << name_of(c);
  const double relative_ulp = std::ldexp(1.0, c.operand == at::kBFloat16 ? -7 : -10);
  const at::Tensor allowed = 2.0 * 2.0 * static_cast<double>(k.p + k.r + 1) * unit * (L * d_masked).sum(3) +
                             32.0 * unit * d_masked.sum(3) * causal +
                             relative_ulp * at::maximum(mma.abs(), wmma.abs()) + (c.operand == at::kHalf ? unit : 0.0);
  expect_within(mma, wmma, allowed, name_of(c) + ", the scores' gradient (v3 against the WMMA kernel)");
}

// Every input's gradient of sum(y w) through the SSD, the fused chunk scan with `kernel` or (null)
// the composition.
std::vector<at::Tensor> input_gradients(const SsdInputs& gpu, const Case& c, const at::Tensor& weight,
                                        const char* kernel) {
  const ScopedVariable scan("TRIAX_MAMBA2_CHUNK_SCAN", kernel ? "1" : "0");
  const ScopedVariable generation("TRIAX_MAMBA2_CHUNK_SCAN_KERNEL", kernel);
  SsdInputs in = gpu;
  std::vector<at::Tensor*> inputs = {&in.x, &in.dt, &in.A, &in.B, &in.C};
  if (in.initial_state.defined()) inputs.push_back(&in.initial_state);
  for (at::Tensor* t : inputs) *t = t->detach().requires_grad_(true);
  (ssd_chunked(in, c.chunk).y.to(at::kFloat) * weight).sum().backward();
  std::vector<at::Tensor> grads;
  for (at::Tensor* t : inputs) grads.push_back(t->grad().to(at::kDouble).cpu());
  return grads;
}
#endif

// The columns and scores kernels v3 against v2 at the 780m chunk shape and the other shapes, and
// the SSD's gradients with v3 against the composition.
TEST(Mamba2SsdCuda, ChunkScanBackwardV3AgreesWithV2AndTheComposition) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
#ifdef TRIAX_WITH_CUDA
  for (const Case& c :
       {Case{1, 512, 48, 64, 1, 128, 256, at::kBFloat16, false}, Case{2, 300, 4, 32, 1, 128, 256, at::kBFloat16, true},
        Case{1, 333, 4, 32, 2, 64, 128, at::kHalf, false}, Case{2, 200, 2, 128, 1, 64, 192, at::kBFloat16, true},
        Case{2, 200, 6, 16, 2, 16, 64, at::kBFloat16, true}})
    expect_columns_v3_agrees(c, 91);
  const Case c{2, 600, 6, 64, 1, 128, 256, at::kBFloat16, true};
  const SsdInputs gpu = on_cuda(exact_inputs(c, 93), c.operand);
  const at::Tensor weight = at::randn({c.batch, c.length, c.heads, c.head_dim}, gpu.dt.options());
  const std::vector<at::Tensor> composed = input_gradients(gpu, c, weight, nullptr);
  const std::vector<at::Tensor> v2 = input_gradients(gpu, c, weight, "v2");
  for (const char* kernel : {"v3", "v3-columns", "v3-forward"}) {
    const std::vector<at::Tensor> fused = input_gradients(gpu, c, weight, kernel);
    for (size_t i = 0; i < fused.size(); ++i) {
      // 5e-3, or where v2 (the fused kernels in place) is further from the composition on these
      // inputs, no more than 1.5 times as far.
      const double allowed = std::max(5e-3, 1.5 * triax::test::max_relative_diff(v2[i], composed[i]));
      EXPECT_LT(triax::test::max_relative_diff(fused[i], composed[i]), allowed) << kernel << ", input " << i;
    }
  }
#endif
}

}  // namespace
