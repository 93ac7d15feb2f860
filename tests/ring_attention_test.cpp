// Ring attention without communication: the block arithmetic (every cp rank's queries attend the
// blocks of every rank one at a time, in the ring's order, merged; the outputs and the gradients,
// dq per rank and dk, dv summed over the ranks that attended each block, must be plain attention
// on the whole sequence under the same mask), and the choice reaching a model through the C ABI.
#include "triax/layers/ring_blocks.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <optional>
#include <vector>

#include "triax/layers/attention_mask.hpp"
#include "triax/layers/context_parallel.hpp"
#include "triax/layers/context_parallel_slice.hpp"

namespace {

struct RingCase {
  int cp;
  std::optional<int64_t> window;
  bool documents;
  c10::ScalarType dtype;
  double tolerance;
};

constexpr int64_t kBatch = 2, kHeads = 4, kKvHeads = 2, kChunk = 3, kHeadDim = 8;

// Each row's documents: a new one starts at a few fixed places (a different set per row).
at::Tensor documents_of(int64_t sequence) {
  at::Tensor starts = at::zeros({kBatch, sequence}, at::kLong);
  starts.select(0, 0).index_fill_(0, at::tensor(std::vector<int64_t>{0, 4, 5, sequence - 2}), 1);
  starts.select(0, 1).index_fill_(0, at::tensor(std::vector<int64_t>{0, sequence / 2}), 1);
  return starts.cumsum(1);
}

void expect_close(const at::Tensor& actual, const at::Tensor& expected, double tolerance, const char* what) {
  const double error = (actual.to(at::kDouble) - expected.to(at::kDouble)).abs().max().item<double>();
  EXPECT_LT(error, tolerance) << what;
}

void check_ring(const RingCase& c) {
  at::manual_seed(7);
  const int64_t sequence = 2 * c.cp * kChunk;
  const auto options = at::TensorOptions().dtype(c.dtype);
  const at::Tensor q = at::randn({kBatch, kHeads, sequence, kHeadDim}, options).requires_grad_();
  const at::Tensor k = at::randn({kBatch, kKvHeads, sequence, kHeadDim}, options).requires_grad_();
  const at::Tensor v = at::randn({kBatch, kKvHeads, sequence, kHeadDim}, options).requires_grad_();
  const double scale = 0.3;

  const at::Tensor positions = at::arange(sequence, at::kLong);
  at::Tensor visible = triax::causal_visibility(positions, positions, c.window).view({1, 1, sequence, sequence});
  triax::RingMasking masking{c.window, at::Tensor()};
  if (c.documents) {
    masking.documents = documents_of(sequence);
    visible = visible & (masking.documents.unsqueeze(2) == masking.documents.unsqueeze(1)).unsqueeze(1);
  }
  const at::Tensor expected = at::scaled_dot_product_attention(q, k, v, visible, 0.0, false, scale, true);
  const at::Tensor grad_out = at::randn_like(expected);
  expected.backward(grad_out);

  at::Tensor dk = at::zeros_like(k), dv = at::zeros_like(v);
  for (int rank = 0; rank < c.cp; ++rank) {
    const triax::RingBlocks blocks(rank, c.cp, kChunk, scale, masking, c10::kCPU);
    auto tokens_of = [&](int r) { return triax::ContextParallelSlice(sequence, r, c.cp).token_indices(c10::kCPU); };
    const at::Tensor mine = tokens_of(rank);
    const at::Tensor local_q = q.detach().index_select(2, mine);
    triax::RingBlocks::Merged merged = triax::RingBlocks::start(local_q);
    for (int step = 0; step < c.cp; ++step) {
      const int source = (rank - step + c.cp) % c.cp;
      blocks.attend(local_q, k.detach().index_select(2, tokens_of(source)),
                    v.detach().index_select(2, tokens_of(source)), source, merged);
    }
    const at::Tensor out = merged.out.to(c.dtype);
    expect_close(out, expected.detach().index_select(2, mine), c.tolerance, "output");

    at::Tensor dq = at::zeros(local_q.sizes(), merged.lse.options());
    for (int step = 0; step < c.cp; ++step) {
      const int source = (rank - step + c.cp) % c.cp;
      const at::Tensor theirs = tokens_of(source);
      const auto [block_dk, block_dv] =
          blocks.backward(grad_out.index_select(2, mine), local_q, k.detach().index_select(2, theirs),
                          v.detach().index_select(2, theirs), out, merged.lse, source, dq);
      dk.index_add_(2, theirs, block_dk);
      dv.index_add_(2, theirs, block_dv);
    }
    expect_close(dq, q.grad().index_select(2, mine), c.tolerance, "dq");
  }
  expect_close(dk, k.grad(), c.tolerance, "dk");
  expect_close(dv, v.grad(), c.tolerance, "dv");
}

TEST(RingBlocks, CausalTwoRanks) { check_ring({2, std::nullopt, false, at::kDouble, 1e-12}); }
TEST(RingBlocks, CausalFourRanks) { check_ring({4, std::nullopt, false, at::kDouble, 1e-12}); }
TEST(RingBlocks, WindowFourRanks) { check_ring({4, 5, false, at::kDouble, 1e-12}); }
// A window shorter than a chunk: whole pairs fall behind it and are skipped.
TEST(RingBlocks, ShortWindowFourRanks) { check_ring({4, 2, false, at::kDouble, 1e-12}); }
// Documents: some queries see none of a block's keys (their log-sum-exp -inf there).
TEST(RingBlocks, DocumentsTwoRanks) { check_ring({2, std::nullopt, true, at::kDouble, 1e-12}); }
TEST(RingBlocks, DocumentsAndWindowFourRanks) { check_ring({4, 4, true, at::kDouble, 1e-12}); }
TEST(RingBlocks, FloatFourRanks) { check_ring({4, std::nullopt, true, at::kFloat, 1e-5}); }

// parallelism.context_parallel_attention through triax_model_context (ABI 1.11): read where the
// struct covers it, off for a host of an older minor.
TEST(RingAttentionChoice, ReachesTheModelThroughTheAbi) {
  triax_model_context context{};
  context.struct_size = sizeof(context);
  context.tp_size = context.pp_size = context.dp_size = 1;
  context.device = "cpu";
  context.dtype = "float32";
  context.cp_ring_attention = 1;
  EXPECT_TRUE(triax::ContextParallel::of(triax::ModelContext::from_c(context)).ring);
  context.cp_ring_attention = 0;
  EXPECT_FALSE(triax::ContextParallel::of(triax::ModelContext::from_c(context)).ring);
  context.cp_ring_attention = 1;
  context.struct_size = offsetof(triax_model_context, cp_ring_attention);
  EXPECT_FALSE(triax::ContextParallel::of(triax::ModelContext::from_c(context)).ring);
}

}  // namespace
