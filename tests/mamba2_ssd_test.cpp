// The chunked SSD (plugins/models/mamba2/mixer/ssd.hpp) against the sequential scan, in fp64: outputs and
// final states for chunk sizes that do and do not divide the length (and exceed it), grouped B/C,
// an initial state, every input's gradient (through the SSD's own backward, with either output's
// gradient alone), fp32 inputs with long chunks and strong decays, bf16 operands, the refusal of a
// bad chunk size, and (Mamba2SsdCuda, with a GPU) the same SSD on CUDA against the CPU's fp64, with
// and without the fused chunk scan (TRIAX_MAMBA2_CHUNK_SCAN), and its y in x's type against fp32 y
// (TRIAX_MAMBA2_Y_IN_OPERAND_TYPE), the SSD alone and in one mixer's step, and the scaled rows
// kernel (x dt, weighted) against LibTorch's products, bit for bit.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "error_of.hpp"
#include "mamba2_ssd_reference.hpp"
#include "mamba2_test_support.hpp"
#include "model_reference_support.hpp"
#include "scoped_variable.hpp"
#include "ssd.hpp"

#ifdef TRIAX_WITH_CUDA
#include "ssd_chunks.hpp"
#include "ssd_cuda.hpp"
#endif

namespace {

using triax::mamba2::SsdInputs;
using triax::mamba2::ssd_chunked;

using triax::test::max_abs_diff;
using triax::test::max_relative_diff;

struct Shape {
  int64_t batch, length, heads, head_dim, groups, state;
};

// fp64 inputs of `shape`; steps of realistic size, decays exp(-dt e^A') with log-normal rates.
SsdInputs random_inputs(uint64_t seed, bool with_initial_state, Shape s = {2, 13, 4, 3, 2, 5}) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
  const at::TensorOptions f64 = at::TensorOptions().dtype(at::kDouble);
  SsdInputs in;
  in.x = at::randn({s.batch, s.length, s.heads, s.head_dim}, g, f64);
  in.dt = at::softplus(at::randn({s.batch, s.length, s.heads}, g, f64) - 1.0);
  in.A = -at::exp(at::randn({s.heads}, g, f64));
  in.B = at::randn({s.batch, s.length, s.groups, s.state}, g, f64);
  in.C = at::randn({s.batch, s.length, s.groups, s.state}, g, f64);
  if (with_initial_state) in.initial_state = at::randn({s.batch, s.heads, s.head_dim, s.state}, g, f64);
  return in;
}

std::vector<at::Tensor*> members(SsdInputs& in) { return {&in.x, &in.dt, &in.A, &in.B, &in.C, &in.initial_state}; }

// Every input's gradient of sum(y w_y) + sum(final w_final) through ssd_chunked (either weight
// undefined: that output unused) or, with chunk 0, through the sequential scan.
std::vector<at::Tensor> gradients(SsdInputs in, int64_t chunk, const at::Tensor& weight_y,
                                  const at::Tensor& weight_state) {
  for (at::Tensor* t : members(in))
    if (t->defined()) *t = t->detach().requires_grad_(true);
  at::Tensor y, state;
  if (chunk > 0) {
    const auto out = ssd_chunked(in, chunk);
    y = out.y, state = out.final_state;
  } else {
    std::tie(y, state) = mamba2_test::sequential_ssd(in.x, in.dt, in.A, in.B, in.C, in.initial_state);
  }
  at::Tensor loss = at::zeros({}, y.options());
  if (weight_y.defined()) loss = loss + (y * weight_y).sum();
  if (weight_state.defined()) loss = loss + (state * weight_state).sum();
  loss.backward();
  std::vector<at::Tensor> grads;
  for (at::Tensor* t : members(in))  // zeros for an input the used outputs do not depend on
    grads.push_back(!t->defined() ? at::Tensor() : t->grad().defined() ? t->grad() : at::zeros_like(*t));
  return grads;
}

TEST(Mamba2Ssd, ChunkedEqualsSequentialForEveryChunkSize) {
  for (bool initial : {false, true}) {
    const SsdInputs in = random_inputs(1, initial);
    const auto [y, state] = mamba2_test::sequential_ssd(in.x, in.dt, in.A, in.B, in.C, in.initial_state);
    ASSERT_GT(y.abs().max().item<double>(), 0.1);
    for (int64_t chunk : {1, 2, 3, 4, 5, 13, 16, 64}) {
      const auto out = ssd_chunked(in, chunk);
      EXPECT_EQ(out.y.scalar_type(), at::kDouble);
      EXPECT_LT(max_abs_diff(out.y, y), 1e-12) << "chunk " << chunk << " initial " << initial;
      EXPECT_LT(max_abs_diff(out.final_state, state), 1e-12) << "chunk " << chunk << " initial " << initial;
    }
  }
}

TEST(Mamba2Ssd, GradientsEqualTheSequentialScans) {
  for (int64_t chunk : {3, 4, 16}) {
    SsdInputs chunked = random_inputs(2, true), sequential = random_inputs(2, true);
    std::vector<at::Tensor*> a = {&chunked.x, &chunked.dt, &chunked.A, &chunked.B, &chunked.C, &chunked.initial_state};
    std::vector<at::Tensor*> b = {&sequential.x,  &sequential.dt, &sequential.A,
                                  &sequential.B,  &sequential.C,  &sequential.initial_state};
    for (at::Tensor* t : a) t->requires_grad_(true);
    for (at::Tensor* t : b) t->requires_grad_(true);
    at::Generator g = at::make_generator<at::CPUGeneratorImpl>(7);
    const at::Tensor weight_y = at::randn({2, 13, 4, 3}, g, at::kDouble);
    const at::Tensor weight_state = at::randn({2, 4, 3, 5}, g, at::kDouble);
    const auto out = ssd_chunked(chunked, chunk);
    ((out.y * weight_y).sum() + (out.final_state * weight_state).sum()).backward();
    const auto [y, state] = mamba2_test::sequential_ssd(sequential.x, sequential.dt, sequential.A, sequential.B,
                                                        sequential.C, sequential.initial_state);
    ((y * weight_y).sum() + (state * weight_state).sum()).backward();
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_TRUE(a[i]->grad().defined()) << i;
      EXPECT_GT(b[i]->grad().abs().max().item<double>(), 1e-3) << i;
      EXPECT_LT(max_abs_diff(a[i]->grad(), b[i]->grad()), 1e-10) << "input " << i << " chunk " << chunk;
    }
  }
}

TEST(Mamba2Ssd, Fp32InputsComputeInFp32) {
  const SsdInputs in = random_inputs(3, false);
  SsdInputs single = in;
  for (at::Tensor* t : {&single.x, &single.dt, &single.A, &single.B, &single.C}) *t = t->to(at::kFloat);
  const auto out = ssd_chunked(single, 4);
  EXPECT_EQ(out.y.scalar_type(), at::kFloat);
  EXPECT_LT(max_abs_diff(out.y, ssd_chunked(in, 4).y), 1e-4);
}

TEST(Mamba2Ssd, RefusesABadChunkSizeAndShapes) {
  const SsdInputs in = random_inputs(4, false);
  const std::string chunk = triax::test::error_of([&] { ssd_chunked(in, 0); });
  EXPECT_NE(chunk.find("chunk_size must be positive, got 0"), std::string::npos) << chunk;
  SsdInputs ungrouped = in;
  ungrouped.B = at::zeros({2, 13, 3, 5}, at::kDouble);
  ungrouped.C = ungrouped.B;
  const std::string groups = triax::test::error_of([&] { ssd_chunked(ungrouped, 4); });
  EXPECT_NE(groups.find("heads not divisible by groups"), std::string::npos) << groups;
}

// An odd length, three groups, an initial state: the SSD's backward with both outputs' gradients
// and with each one's alone equals autograd through the sequential scan.
TEST(Mamba2Ssd, EitherOutputsGradientAloneEqualsTheSequentialScans) {
  const SsdInputs in = random_inputs(5, true, {2, 37, 6, 3, 3, 4});
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(8);
  const at::Tensor weight_y = at::randn({2, 37, 6, 3}, g, at::kDouble);
  const at::Tensor weight_state = at::randn({2, 6, 3, 4}, g, at::kDouble);
  for (const auto& [wy, ws] : std::vector<std::pair<at::Tensor, at::Tensor>>{
           {weight_y, weight_state}, {weight_y, at::Tensor()}, {at::Tensor(), weight_state}}) {
    const std::vector<at::Tensor> expected = gradients(in, 0, wy, ws);
    for (int64_t chunk : {1, 8, 37, 64}) {
      const std::vector<at::Tensor> got = gradients(in, chunk, wy, ws);
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_LT(max_abs_diff(got[i], expected[i]), 1e-10)
            << "input " << i << " chunk " << chunk << " y " << wy.defined() << " state " << ws.defined();
    }
  }
}

// Chunks of 256 with decays as strong as a trained model's (rates up to 16, steps up to ~0.3):
// fp32 inputs stay within fp32 rounding of the fp64 result, outputs and gradients.
TEST(Mamba2Ssd, Fp32LongChunksStayWithinRounding) {
  SsdInputs in = random_inputs(6, true, {1, 300, 4, 8, 2, 16});
  in.A = -at::linspace(1.0, 16.0, 4, at::kDouble);
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(9);
  const at::Tensor weight_y = at::randn({1, 300, 4, 8}, g, at::kDouble);
  const at::Tensor weight_state = at::randn({1, 4, 8, 16}, g, at::kDouble);
  SsdInputs single = in;
  for (at::Tensor* t : members(single)) *t = t->to(at::kFloat);
  for (int64_t chunk : {64, 256}) {
    const auto exact = ssd_chunked(in, chunk), rounded = ssd_chunked(single, chunk);
    EXPECT_LT(max_relative_diff(rounded.y, exact.y), 1e-5) << chunk;
    EXPECT_LT(max_relative_diff(rounded.final_state, exact.final_state), 1e-5) << chunk;
    const std::vector<at::Tensor> expected = gradients(in, chunk, weight_y, weight_state);
    const std::vector<at::Tensor> got = gradients(single, chunk, weight_y.to(at::kFloat), weight_state.to(at::kFloat));
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].scalar_type(), at::kFloat);
      EXPECT_LT(max_relative_diff(got[i], expected[i]), 1e-4) << "input " << i << " chunk " << chunk;
    }
  }
}

// bf16 x, B and C (dt, A and the initial state fp32, as the mixer passes them): the chunk
// products take bf16 operands with fp32 accumulation; outputs and gradients within 1% of the
// largest value of the fp64 result on the same (bf16-rounded) inputs.
TEST(Mamba2Ssd, Bf16OperandsStayWithinTheirTolerance) {
  SsdInputs in = random_inputs(7, true, {2, 100, 4, 8, 2, 16});
  for (at::Tensor* t : {&in.x, &in.B, &in.C}) *t = t->to(at::kBFloat16).to(at::kDouble);
  SsdInputs mixed = in;
  for (at::Tensor* t : members(mixed)) *t = t->to(at::kFloat);
  for (at::Tensor* t : {&mixed.x, &mixed.B, &mixed.C}) *t = t->to(at::kBFloat16);
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(10);
  const at::Tensor weight_y = at::randn({2, 100, 4, 8}, g, at::kDouble);
  const auto out = ssd_chunked(mixed, 32);
  EXPECT_EQ(out.y.scalar_type(), at::kFloat);
  EXPECT_LT(max_relative_diff(out.y, ssd_chunked(in, 32).y), 1e-2);
  const std::vector<at::Tensor> expected = gradients(in, 32, weight_y, at::Tensor());
  const std::vector<at::Tensor> got = gradients(mixed, 32, weight_y.to(at::kFloat), at::Tensor());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].scalar_type(), members(mixed)[i]->scalar_type()) << i;
    EXPECT_LT(max_relative_diff(got[i], expected[i]), 1e-2) << "input " << i;
  }
}

// The SSD on a GPU against the CPU's fp64 result on the same values: fp32 inputs, then bf16 x, B
// and C through the tensor-core products (bf16 operands, fp32 accumulation and results; the
// intra-chunk mask by its CUDA kernel), outputs and every input's gradient, within 1e-4 (fp32)
// and 1e-2 (bf16) of the largest value.
void expect_cuda_matches_cpu(Shape shape, uint64_t seed, int64_t chunk, bool with_initial_state) {
  SsdInputs in = random_inputs(seed, with_initial_state, shape);
  for (at::Tensor* t : {&in.x, &in.B, &in.C}) *t = t->to(at::kBFloat16).to(at::kDouble);
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed + 1);
  const at::Tensor weight_y = at::randn({shape.batch, shape.length, shape.heads, shape.head_dim}, g, at::kDouble);
  const at::Tensor weight_state = at::randn({shape.batch, shape.heads, shape.head_dim, shape.state}, g, at::kDouble);
  const auto exact = ssd_chunked(in, chunk);
  const std::vector<at::Tensor> expected = gradients(in, chunk, weight_y, weight_state);
  for (bool bf16 : {false, true}) {
    SsdInputs gpu = in;
    for (at::Tensor* t : members(gpu))
      if (t->defined()) *t = t->to(at::kCUDA, at::kFloat);
    if (bf16)
      for (at::Tensor* t : {&gpu.x, &gpu.B, &gpu.C}) *t = t->to(at::kBFloat16);
    const double tolerance = bf16 ? 1e-2 : 1e-4;
    const auto out = ssd_chunked(gpu, chunk);
    EXPECT_LT(max_relative_diff(out.y.cpu(), exact.y), tolerance) << "bf16 " << bf16;
    EXPECT_LT(max_relative_diff(out.final_state.cpu(), exact.final_state), tolerance) << "bf16 " << bf16;
    const std::vector<at::Tensor> got =
        gradients(gpu, chunk, weight_y.to(at::kCUDA, at::kFloat), weight_state.to(at::kCUDA, at::kFloat));
    for (size_t i = 0; i < got.size(); ++i) {
      if (!expected[i].defined()) continue;  // no initial state
      EXPECT_TRUE(got[i].is_cuda()) << i;
      EXPECT_LT(max_relative_diff(got[i].cpu(), expected[i]), tolerance) << "input " << i << " bf16 " << bf16;
    }
  }
}

// Skipped without a GPU (label gpu): two groups, an initial state, a length chunks of 64 do not divide;
// the masked-scores kernels and the fused chunk scan each.
TEST(Mamba2SsdCuda, MatchesTheCpuInFp32AndBf16) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  for (const char* scan : {"0", "1"}) {
    const ScopedVariable scan_switch("TRIAX_MAMBA2_CHUNK_SCAN", scan);
    expect_cuda_matches_cpu({2, 300, 8, 16, 2, 32}, 11, 64, true);
  }
}

// Odd lengths, three groups of two heads, chunks of 32 (several tiles of the mask's backward in
// one chunk, one partial), with and without an initial state.
TEST(Mamba2SsdCuda, OddLengthsAndSeveralGroupsMatchTheCpu) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  for (bool initial : {false, true}) {
    expect_cuda_matches_cpu({3, 257, 6, 8, 3, 16}, 21, 48, initial);
    expect_cuda_matches_cpu({1, 77, 6, 8, 3, 16}, 23, 100, initial);
  }
}

// Whether the forward of `in` (on CUDA) takes the fused chunk scan: else a test of it tests nothing.
void expect_fused_chunk_scan(const SsdInputs& in, int64_t chunk, bool expected) {
#ifdef TRIAX_WITH_CUDA
  EXPECT_EQ(triax::mamba2::ssd::chunk_scan_applies(triax::mamba2::ssd::into_chunks(in, chunk)), expected)
      << "chunk " << chunk;
#else
  (void)in, (void)chunk, (void)expected;
#endif
}

SsdInputs bf16_on_cuda(Shape shape, uint64_t seed, bool with_initial_state) {
  SsdInputs in = random_inputs(seed, with_initial_state, shape);
  for (at::Tensor* t : members(in))
    if (t->defined()) *t = t->to(at::kCUDA, at::kFloat);
  for (at::Tensor* t : {&in.x, &in.B, &in.C}) *t = t->to(at::kBFloat16);
  return in;
}

// The fused chunk scan switched on, against the CPU's fp64 (expect_cuda_matches_cpu: its bf16
// half takes the kernel; the backward is the LibTorch one): chunks of 64, 128 and 256 (one, two
// and four row tiles), states of 16, 64 and 128, head_dim 16, 32 and 64, one and two groups,
// lengths the chunk does not divide, with and without an initial state.
TEST(Mamba2SsdCuda, FusedChunkScanMatchesTheCpu) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  const ScopedVariable on("TRIAX_MAMBA2_CHUNK_SCAN", "1");
  struct Case {
    Shape shape;
    int64_t chunk;
    bool initial;
  };
  for (const Case& c : {Case{{2, 300, 4, 64, 1, 128}, 256, true}, Case{{1, 333, 4, 32, 2, 64}, 128, false},
                        Case{{2, 200, 6, 16, 2, 16}, 64, true}, Case{{1, 512, 2, 64, 1, 128}, 64, false},
                        Case{{1, 333, 6, 32, 3, 64}, 128, true}, Case{{2, 200, 2, 128, 1, 64}, 192, false}}) {
    expect_fused_chunk_scan(bf16_on_cuda(c.shape, 31, c.initial), c.chunk, true);
    expect_cuda_matches_cpu(c.shape, 31, c.chunk, c.initial);
  }
  expect_fused_chunk_scan(bf16_on_cuda({1, 100, 2, 8, 1, 16}, 31, false), 64, false);  // head_dim 8: fallback
  expect_fused_chunk_scan(bf16_on_cuda({1, 100, 2, 16, 1, 16}, 31, false), 48, false);  // chunk 48: fallback
}

// The scaled rows kernel (TRIAX_MAMBA2_SCALED_ROWS_KERNEL) against the LibTorch products it
// replaces, bit for bit: x dt stored into the chunks' layout (a permuted view written in place) and
// the chunk states' weighted x dt, x in bf16, fp16 and fp32, one group and three.
TEST(Mamba2SsdCuda, ScaledRowsKernelGivesLibTorchsBits) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
#ifdef TRIAX_WITH_CUDA
  namespace ssd = triax::mamba2::ssd;
  for (const Shape& shape : {Shape{2, 512, 4, 64, 1, 16}, Shape{2, 256, 6, 32, 3, 16}}) {
    for (c10::ScalarType type : {at::kBFloat16, at::kHalf, at::kFloat}) {
      SsdInputs in = bf16_on_cuda(shape, 61, false);
      in.x = in.x.to(type);
      auto run = [&](const char* on) {
        const ScopedVariable kernel("TRIAX_MAMBA2_SCALED_ROWS_KERNEL", on);
        const ssd::Chunks k = ssd::into_chunks(in, 128);
        const at::Tensor w = ssd::per_position(ssd::to_chunk_end(k));
        const bool expected = on[0] == '1';
        EXPECT_EQ(ssd::scaled_rows_kernel_applies(in.x.reshape({k.b, k.c, k.q, k.g, k.r, k.p}),
                                                  k.dt.reshape({k.b, k.c, k.q, k.g, k.r, 1})),
                  expected);
        EXPECT_EQ(ssd::scaled_rows_kernel_applies(k.xdt.view({k.b, k.c, k.g, k.q, k.r, k.p}), w), expected);
        return std::make_pair(k.xdt, ssd::weighted_xdt(k, w));
      };
      const auto [libtorch_xdt, libtorch_weighted] = run("0");
      const auto [kernel_xdt, kernel_weighted] = run("1");
      EXPECT_TRUE(at::equal(kernel_xdt, libtorch_xdt)) << c10::toString(type) << ", groups " << shape.groups;
      EXPECT_TRUE(at::equal(kernel_weighted, libtorch_weighted)) << c10::toString(type) << ", groups " << shape.groups;
    }
  }
#endif
}

// How far each of `paths` (y, then every input's gradient) is from `exact` (fp64): the largest
// difference over the largest exact value.
std::vector<double> errors_against(const std::vector<at::Tensor>& path, const std::vector<at::Tensor>& exact) {
  std::vector<double> errors;
  for (size_t i = 0; i < exact.size(); ++i)
    errors.push_back(exact[i].defined() ? max_relative_diff(path[i].cpu(), exact[i]) : 0.0);
  return errors;
}

// x as the mixer's in_proj split leaves it (a strided view of a wider projection) gives the same
// output as contiguous x; the fused forward and backward and the fused forward with the composed
// backward (TRIAX_MAMBA2_CHUNK_SCAN_BACKWARD=0), each with the state passing's bf16 copies
// (TRIAX_MAMBA2_STATES_IN_OPERAND_TYPE) off and on, against the composition (switches off), y and
// every input's gradient.
// Each path is held to its error against the fp64 result on the same (bf16-rounded) inputs, not to
// its distance from the composition: at this shape the CPU composition sits 0.0004 to 0.011 of
// the largest value from fp64 (by output and draw) and its variants with chunks of 128 and 200,
// equally valid, up to 0.0075 from it, so two sound bf16 paths are that far apart (a bound of 5e-3
// on the distance failed some draws). Each error must stay within twice the composition's, or twice
// 2^-8 (one bf16 ulp of the largest value: what storing a bf16 result may cost) where that is
// smaller; the chunk variants took at most 0.84 of it over ten draws, a wrong term costs far more.
TEST(Mamba2SsdCuda, FusedChunkScanTakesStridedXAndAgreesWithTheComposition) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  const Shape shape{2, 600, 6, 64, 1, 128};
  const int64_t chunk = 256;
  SsdInputs in = bf16_on_cuda(shape, 41, true);
  SsdInputs exact_in = in;
  for (at::Tensor* t : members(exact_in))
    if (t->defined()) *t = t->to(at::kCPU, at::kDouble);
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(42);
  const at::Tensor weight_y = at::randn({shape.batch, shape.length, shape.heads, shape.head_dim}, g, at::kFloat);
  const int64_t width = shape.heads * shape.head_dim;
  const at::Tensor projection = at::randn({shape.batch, shape.length, 3 * width}, g, at::kFloat).to(in.x.options());
  projection.narrow(-1, width, width).copy_(in.x.reshape({shape.batch, shape.length, width}));
  SsdInputs strided = in;
  strided.x = projection.narrow(-1, width, width).view({shape.batch, shape.length, shape.heads, shape.head_dim});
  ASSERT_FALSE(strided.x.is_contiguous());
  std::vector<at::Tensor> exact{ssd_chunked(exact_in, chunk).y};
  for (const at::Tensor& d : gradients(exact_in, chunk, weight_y.to(at::kDouble), at::Tensor())) exact.push_back(d);
  // y, then the gradients of x, dt, A, B, C and the initial state.
  auto run = [&](const char* scan, const char* backward, const char* states) {
    const ScopedVariable scan_switch("TRIAX_MAMBA2_CHUNK_SCAN", scan);
    const ScopedVariable backward_switch("TRIAX_MAMBA2_CHUNK_SCAN_BACKWARD", backward);
    const ScopedVariable states_switch("TRIAX_MAMBA2_STATES_IN_OPERAND_TYPE", states);
    expect_fused_chunk_scan(in, chunk, scan[0] == '1');
    std::vector<at::Tensor> out{ssd_chunked(in, chunk).y};
    if (scan[0] == '1') {
      EXPECT_TRUE(at::equal(ssd_chunked(strided, chunk).y, out[0]));
    }
    for (const at::Tensor& d : gradients(in, chunk, weight_y.to(at::kCUDA), at::Tensor())) out.push_back(d);
    return errors_against(out, exact);
  };
  struct Path {
    const char *name, *scan, *backward;
  };
  const std::vector<double> composed = run("0", "0", "0");
  for (const char* states : {"0", "1"}) {
    for (const Path& path : {Path{"composed", "0", "0"}, Path{"fused", "1", "1"}, Path{"forward only", "1", "0"}}) {
      if (states[0] == '0' && path.scan[0] == '0') continue;  // the baseline itself
      const std::vector<double> errors = run(path.scan, path.backward, states);
      for (size_t i = 0; i < composed.size(); ++i)
        EXPECT_LE(errors[i], 2.0 * std::max(composed[i], 1.0 / 256))
            << path.name << ", bf16 states " << states << ", output " << i
            << " (y, x, dt, A, B, C, initial): " << errors[i] << " from fp64, the composition " << composed[i];
    }
  }
}

// The fused chunk scan's y in x's type (TRIAX_MAMBA2_Y_IN_OPERAND_TYPE, on by default) against
// fp32 y on the same inputs: y in bf16 (fp16) when on, fp32 when off, the final state fp32 either
// way; y, the final state and every input's gradient (dy then in y's type) within 1e-2 of the
// largest value. One group with chunks dividing the length (dy read in place), and three groups
// with a length they do not divide (dy padded and laid out).
TEST(Mamba2SsdCuda, YInTheOperandTypeAgreesWithFp32Y) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  const ScopedVariable scan("TRIAX_MAMBA2_CHUNK_SCAN", "1");
  for (const Shape& shape : {Shape{2, 512, 4, 64, 1, 128}, Shape{2, 333, 6, 32, 3, 64}}) {
    for (c10::ScalarType operand : {at::kBFloat16, at::kHalf}) {
      SsdInputs in = bf16_on_cuda(shape, 51, true);
      for (at::Tensor* t : {&in.x, &in.B, &in.C}) *t = t->to(operand);
      expect_fused_chunk_scan(in, 256, true);
      const at::Tensor weight_y = at::randn({shape.batch, shape.length, shape.heads, shape.head_dim}, in.dt.options());
      const at::Tensor weight_state =
          at::randn({shape.batch, shape.heads, shape.head_dim, shape.state}, in.dt.options());
      auto run = [&](const char* on) {
        const ScopedVariable y_switch("TRIAX_MAMBA2_Y_IN_OPERAND_TYPE", on);
        const auto out = ssd_chunked(in, 256);
        EXPECT_EQ(out.y.scalar_type(), on[0] == '1' ? operand : at::kFloat) << on;
        EXPECT_EQ(out.final_state.scalar_type(), at::kFloat) << on;
        std::vector<at::Tensor> result{out.y, out.final_state};
        for (const at::Tensor& g : gradients(in, 256, weight_y, weight_state)) result.push_back(g);
        return result;
      };
      const std::vector<at::Tensor> fp32_y = run("0"), operand_y = run("1");
      for (size_t i = 0; i < fp32_y.size(); ++i)
        EXPECT_LT(max_relative_diff(operand_y[i].cpu(), fp32_y[i].cpu()), 1e-2)
            << "output (0, 1) or input " << i - 2 << ", " << c10::toString(operand) << ", groups " << shape.groups;
    }
  }
}

// One bf16 mixer's step with y (and dy) in bf16 against fp32 y: output and the gradients of the
// input and every parameter within 2e-2 of the largest value.
TEST(Mamba2SsdCuda, OneMixerStepWithYInTheOperandTypeAgreesWithFp32Y) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  const ScopedVariable scan("TRIAX_MAMBA2_CHUNK_SCAN", "1");
  mamba2_test::expect_cuda_mixer_step_switch_within("TRIAX_MAMBA2_Y_IN_OPERAND_TYPE", 2e-2);
}

}  // namespace
