// The SSD backward's fused elementwise passes (plugins/models/mamba2/mixer/ssd_backward_cuda.hpp,
// TRIAX_MAMBA2_SSD_BACKWARD_FUSED) against the LibTorch composition they replace, on the same CUDA
// inputs (Mamba2SsdCuda: skipped without a GPU): every input's gradient of the SSD, switch on vs
// off, at a mamba2-780m-like shape (with the fused chunk scan's contiguous d xdt) and odd ones
// (lengths the chunk does not divide, several groups, head_dim 32 and 16, chunks the chunk scan
// does not take, whose d xdt is a permuted view), fp32, bf16 and fp16 inputs, x contiguous and
// as a strided view, dy in fp32 and bf16; and the term kernels' packed path
// (TRIAX_MAMBA2_SSD_TERMS_VECTOR) and warp-per-pair path each against the composition, at every
// head_dim the packed path takes (8 to 256: 1 to 32 lanes a pair) and one it does not (24). The
// same math with sums in another order (tolerance_of). And the state passing's kernels storing
// the backward's operands in bf16 / fp16 (TRIAX_MAMBA2_STATES_IN_OPERAND_TYPE) against casts.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model_reference_support.hpp"
#include "scoped_variable.hpp"
#include "ssd.hpp"
#include "ssd_backward.hpp"

#ifdef TRIAX_WITH_CUDA
#include "ssd_backward_cuda.hpp"
#include "ssd_chunks.hpp"
#include "ssd_cuda.hpp"
#endif

namespace {

using triax::mamba2::SsdInputs;
using triax::mamba2::ssd::ssd_backward;
using triax::mamba2::ssd::SsdGradients;

struct FusedCase {
  int64_t batch, length, heads, head_dim, groups, state, chunk;
  bool initial_state, strided_x;
};

struct BackwardProblem {
  SsdInputs in;
  at::Tensor grad_y, grad_final_state;
};

// fp32 draws on the CPU (the same values for every dtype), moved to CUDA; x, B and C in `type`.
// A strided x is the middle third of a wider projection, as the mixer's in_proj split gives it.
BackwardProblem backward_problem_on_cuda(const FusedCase& c, at::ScalarType type, at::ScalarType dy_type,
                                         uint64_t seed) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
  const at::TensorOptions f32 = at::TensorOptions().dtype(at::kFloat);
  auto draw = [&](at::IntArrayRef sizes) { return at::randn(sizes, g, f32); };
  BackwardProblem p;
  SsdInputs& in = p.in;
  in.x = draw({c.batch, c.length, c.heads, c.head_dim}).to(at::kCUDA, type);
  in.dt = at::softplus(draw({c.batch, c.length, c.heads}) - 1.0).to(at::kCUDA);
  in.A = (-at::exp(draw({c.heads}))).to(at::kCUDA);
  in.B = draw({c.batch, c.length, c.groups, c.state}).to(at::kCUDA, type);
  in.C = draw({c.batch, c.length, c.groups, c.state}).to(at::kCUDA, type);
  if (c.initial_state) in.initial_state = draw({c.batch, c.heads, c.head_dim, c.state}).to(at::kCUDA);
  p.grad_y = draw({c.batch, c.length, c.heads, c.head_dim}).to(at::kCUDA, dy_type);
  p.grad_final_state = draw({c.batch, c.heads, c.head_dim, c.state}).to(at::kCUDA);
  if (c.strided_x) {
    const int64_t width = c.heads * c.head_dim;
    const at::Tensor projection = at::zeros({c.batch, c.length, 3 * width}, in.x.options());
    projection.narrow(-1, width, width).copy_(in.x.reshape({c.batch, c.length, width}));
    in.x = projection.narrow(-1, width, width).view({c.batch, c.length, c.heads, c.head_dim});
  }
  return p;
}

// The gradients of x, dt, A, B, C and the initial state (undefined without one), with the fused
// passes switched on or off; the switch must decide whether they run.
std::vector<at::Tensor> gradients_with_fused_passes(const BackwardProblem& p, int64_t chunk, bool fused) {
  const ScopedVariable fused_switch("TRIAX_MAMBA2_SSD_BACKWARD_FUSED", fused ? "1" : "0");
#ifdef TRIAX_WITH_CUDA
  EXPECT_EQ(triax::mamba2::ssd::ssd_backward_fused_applies(triax::mamba2::ssd::into_chunks(p.in, chunk)), fused);
#endif
  const SsdGradients d = ssd_backward(p.in, chunk, p.grad_y, p.grad_final_state);
  return {d.x, d.dt, d.A, d.B, d.C, d.initial_state};
}

// How far gradient i (x, dt, A, B, C, initial state) of the two paths may differ, relative to its
// largest value. x's is stored in x's type: in bf16 / fp16 one value may round the other way (one
// unit in its last place: up to 2^-7 of the largest in bf16, 2^-10 in fp16). dt's and A's come through the decays'
// reverse cumulative sums, which cancel: reordered sums show there, though well below fp32's own error against fp64
// (4e-5 at length 1024). B's, C's and the initial state's take the same dread (the same product, rounded once).
double tolerance_of(size_t i, at::ScalarType type) {
  switch (i) {
    case 0:
      return type == at::kBFloat16 ? 1e-2 : type == at::kHalf ? 2e-3 : 1e-5;
    case 1:
    case 2:
      return 5e-4;
    default:
      return 1e-6;
  }
}

void expect_fused_matches_composition(const FusedCase& c, at::ScalarType type, at::ScalarType dy_type,
                                      const char* packed_terms = "1") {
  const ScopedVariable packed_switch("TRIAX_MAMBA2_SSD_TERMS_VECTOR", packed_terms);
  const BackwardProblem p = backward_problem_on_cuda(c, type, dy_type, 7 + static_cast<uint64_t>(c.length));
  const std::vector<at::Tensor> fused = gradients_with_fused_passes(p, c.chunk, true),
                                composed = gradients_with_fused_passes(p, c.chunk, false);
  const char* names[] = {"x", "dt", "A", "B", "C", "initial_state"};
  const std::string label = std::string(c10::toString(type)) + ", dy " + c10::toString(dy_type) + ", length " +
                            std::to_string(c.length) + ", chunk " + std::to_string(c.chunk) + ", head_dim " +
                            std::to_string(c.head_dim) + ", packed terms " + packed_terms;
  for (size_t i = 0; i < fused.size(); ++i) {
    ASSERT_EQ(fused[i].defined(), composed[i].defined()) << names[i] << " " << label;
    if (!composed[i].defined()) continue;
    EXPECT_TRUE(fused[i].is_cuda()) << names[i];
    EXPECT_EQ(fused[i].scalar_type(), composed[i].scalar_type()) << names[i] << " " << label;
    EXPECT_EQ(fused[i].sizes(), composed[i].sizes()) << names[i] << " " << label;
    EXPECT_LT(triax::test::max_relative_diff(fused[i], composed[i]), tolerance_of(i, type)) << names[i] << " " << label;
  }
}

TEST(Mamba2SsdCuda, FusedBackwardPassesMatchTheCompositionAtThe780mShape) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  const FusedCase c{2, 2048, 48, 64, 1, 128, 256, true, false};
  expect_fused_matches_composition(c, at::kBFloat16, at::kFloat);
  expect_fused_matches_composition(c, at::kBFloat16, at::kBFloat16);
  expect_fused_matches_composition(c, at::kFloat, at::kFloat);
}

TEST(Mamba2SsdCuda, FusedBackwardPassesMatchTheCompositionOnOddShapes) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  for (const FusedCase& c :
       {FusedCase{3, 300, 8, 32, 2, 64, 128, true, false}, FusedCase{2, 257, 6, 32, 3, 16, 48, true, true},
        FusedCase{1, 77, 4, 16, 2, 32, 100, false, false}, FusedCase{2, 600, 6, 64, 1, 128, 256, false, true}}) {
    for (at::ScalarType type : {at::kFloat, at::kBFloat16, at::kHalf}) expect_fused_matches_composition(c, type, type);
  }
}

TEST(Mamba2SsdCuda, PackedAndWarpPerPairTermKernelsMatchTheCompositionOnEveryHeadDim) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  for (const FusedCase& c :
       {FusedCase{2, 130, 4, 8, 2, 16, 64, true, true}, FusedCase{2, 257, 6, 16, 3, 16, 48, true, true},
        FusedCase{1, 200, 3, 24, 1, 16, 64, true, false}, FusedCase{2, 300, 4, 128, 2, 32, 128, false, true},
        FusedCase{1, 150, 2, 256, 1, 16, 64, true, false}}) {
    for (const char* packed : {"1", "0"}) {
      expect_fused_matches_composition(c, at::kBFloat16, at::kFloat, packed);
      expect_fused_matches_composition(c, at::kFloat, at::kFloat, packed);
      expect_fused_matches_composition(c, at::kHalf, at::kHalf, packed);
    }
  }
}

// The state passing's kernels storing the backward's operands in their type
// (TRIAX_MAMBA2_STATES_IN_OPERAND_TYPE: the entering states' copy, the chunk states' gradient)
// against fp32 tensors cast after: the kernel's copy equals the cast, and every gradient agrees
// (the same roundings: expected the same bits; held to tolerance_of).
TEST(Mamba2SsdCuda, StatesInTheOperandTypeGiveTheSameGradients) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  for (const FusedCase& c :
       {FusedCase{2, 2048, 48, 64, 1, 128, 256, true, false}, FusedCase{2, 257, 6, 32, 3, 16, 48, true, true},
        FusedCase{1, 77, 4, 16, 2, 32, 100, false, false}}) {
    for (at::ScalarType type : {at::kBFloat16, at::kHalf, at::kFloat}) {
      const BackwardProblem p = backward_problem_on_cuda(c, type, type, 31 + static_cast<uint64_t>(c.length));
      const std::string label = std::string(c10::toString(type)) + ", length " + std::to_string(c.length);
#ifdef TRIAX_WITH_CUDA
      {
        namespace ssd = triax::mamba2::ssd;
        const ScopedVariable on("TRIAX_MAMBA2_STATES_IN_OPERAND_TYPE", "1");
        const ssd::Chunks k = ssd::into_chunks(p.in, c.chunk);
        const ssd::PassedStates passed = ssd::pass_states_cuda(k, p.in.initial_state, ssd::chunk_states(k), true);
        ASSERT_EQ(passed.entering_operand.defined(), type != at::kFloat) << label;
        if (passed.entering_operand.defined()) {
          EXPECT_EQ(passed.entering_operand.scalar_type(), type) << label;
          EXPECT_TRUE(at::equal(passed.entering_operand, passed.entering.to(type))) << label;
        }
      }
#endif
      auto run = [&](const char* on) {
        const ScopedVariable setting("TRIAX_MAMBA2_STATES_IN_OPERAND_TYPE", on);
        const SsdGradients d = ssd_backward(p.in, c.chunk, p.grad_y, p.grad_final_state);
        return std::vector<at::Tensor>{d.x, d.dt, d.A, d.B, d.C, d.initial_state};
      };
      const std::vector<at::Tensor> off = run("0"), on = run("1");
      for (size_t i = 0; i < off.size(); ++i) {
        ASSERT_EQ(on[i].defined(), off[i].defined()) << i << " " << label;
        if (!off[i].defined()) continue;
        EXPECT_LT(triax::test::max_relative_diff(on[i], off[i]), tolerance_of(i, type))
            << "gradient " << i << " (x, dt, A, B, C, initial), " << label
            << ", same bits: " << at::equal(on[i], off[i]);
      }
    }
  }
}

}  // namespace
