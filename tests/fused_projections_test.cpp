// The fused projections of the SDK's Llama-family layers, run by every rank of a tensor-parallel
// group as large as the world (1, 2 or 4 ranks under mpirun), against the unfused computation
// they replace, done whole on every rank from the same weights:
// - GroupedQueryAttention's qkv_proj (q/k/v grouped by key/value head, QkvLayout) against
//   separate q, k and v projections, rotary and attention;
// - SwiGluMlp's gate_up_proj ([2, intermediate, hidden]) against separate gate and up projections.
// For both tp_modes, with and without the overlapped collectives (tp_linear_async_communication),
// and fp32/fp64 the outputs, the input gradients and the weight gradients (gathered and taken
// apart again) must equal the unfused ones.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "tensor_parallel_group.hpp"
#include "triax/layers/fused_ops.hpp"
#include "triax/layers/grouped_query_attention.hpp"
#include "triax/layers/rotary_embedding.hpp"
#include "triax/layers/swiglu_mlp.hpp"

// A namespace of this file's own: the multi-rank test files compile together (tests/multi_rank.cmake)
// and share names such as kSeq or toy_vtable.
namespace fused_projections_test {
namespace {

using triax::TensorParallel;
using triax::TpMode;

// Parameters: the tp mode, and whether the column-parallel layers overlap their collective with
// their GEMMs (tp_linear_async_communication).
class FusedProjectionsTest : public ::testing::TestWithParam<std::tuple<TpMode, bool>> {
 protected:
  void SetUp() override {
    world_ = triax::testing::world_tensor_parallel(std::get<0>(GetParam()));
    tp_ = world_.tp;
  }

  triax::ModelContext context(c10::ScalarType dtype) const {
    triax::ModelContext c;
    c.tp_rank = tp_.rank;
    c.tp_size = tp_.size;
    c.tp_mode = tp_.mode;
    c.host = tp_.host;
    c.dtype = dtype;
    c.tp_linear_async_communication = std::get<1>(GetParam());
    return c;
  }
  std::string where(c10::ScalarType dtype) const {
    return std::string(tp_.mode == TpMode::ReduceScatter ? "REDUCE_SCATTER " : "ALL_REDUCE ") +
           (std::get<1>(GetParam()) ? "overlapped " : "") + c10::toString(dtype) + " tp " +
           std::to_string(tp_.size) + ": ";
  }

  triax::testing::WorldTensorParallel world_;
  TensorParallel tp_;
};

using triax::testing::assign;
using triax::testing::between_blocks;
using triax::testing::gathered;
using triax::testing::leaf;
using triax::testing::seeded;
using triax::testing::shard_of;

void expect_close(const at::Tensor& actual, const at::Tensor& expected, const std::string& what) {
  triax::testing::expect_close(actual, expected, what, expected.scalar_type() == at::kDouble ? 1e-12 : 2e-6);
}

const c10::ScalarType kDtypes[] = {at::kFloat, at::kDouble};
constexpr int64_t kBatch = 2, kSeq = 8;

// hidden 32, 8 query heads of 4 over 4 kv heads (2 per group), biases on q, k and v: at tp 2 each
// rank holds 2 groups, at tp 4 one.
TEST_P(FusedProjectionsTest, QkvProjectionEqualsSeparateQKAndV) {
  triax::AttentionShape shape;
  shape.hidden_size = 32;
  shape.heads = 8;
  shape.kv_heads = 4;
  shape.qkv_bias = true;
  const int64_t d = 4, q_out = 32, kv_out = 16;
  const triax::QkvLayout layout = triax::QkvLayout::of(shape);
  for (c10::ScalarType dtype : kDtypes) {
    const std::string what = where(dtype);
    const at::Tensor wq = seeded({q_out, 32}, 1, dtype, 0.3), wk = seeded({kv_out, 32}, 2, dtype, 0.3);
    const at::Tensor wv = seeded({kv_out, 32}, 3, dtype, 0.3), wo = seeded({32, q_out}, 4, dtype, 0.3);
    const at::Tensor bq = seeded({q_out}, 5, dtype), bk = seeded({kv_out}, 6, dtype), bv = seeded({kv_out}, 7, dtype);
    const at::Tensor x = seeded({kBatch, kSeq, 32}, 8, dtype), grad = seeded({kBatch, kSeq, 32}, 9, dtype);
    triax::RotaryEmbedding rope({d, 10000.0, kSeq, std::nullopt}, c10::Device(c10::kCPU));
    auto [cos, sin] = rope.tables(kSeq, dtype);

    triax::GroupedQueryAttention attention(shape, context(dtype));
    assign(attention.qkv_proj->weight, shard_of(layout.fuse(wq, wk, wv), 0, tp_));  // whole groups per rank
    assign(attention.qkv_proj->bias, shard_of(layout.fuse(bq, bk, bv), 0, tp_));
    assign(attention.o_proj->weight, shard_of(wo, 1, tp_));
    at::Tensor xl = leaf(between_blocks(x, tp_));
    at::Tensor y = attention.forward(xl, cos, sin);
    y.backward(between_blocks(grad, tp_));

    // The unfused computation, whole, on every rank.
    at::Tensor rx = leaf(x), rwq = leaf(wq), rwk = leaf(wk), rwv = leaf(wv), rbq = leaf(bq), rbk = leaf(bk);
    at::Tensor rbv = leaf(bv);
    auto heads = [&](const at::Tensor& w, const at::Tensor& b, int64_t n) {
      return at::linear(rx, w, b).view({kBatch, kSeq, n, d}).transpose(1, 2);
    };
    const at::Tensor q = triax::apply_rotary(heads(rwq, rbq, 8), cos, sin);
    const at::Tensor k = triax::apply_rotary(heads(rwk, rbk, 4), cos, sin);
    const at::Tensor attended =
        at::scaled_dot_product_attention(q, k, heads(rwv, rbv, 4), {}, 0.0, /*is_causal=*/true, std::nullopt, true);
    const at::Tensor ry = at::linear(attended.transpose(1, 2).reshape({kBatch, kSeq, q_out}), wo);
    ry.backward(grad);

    expect_close(y, between_blocks(ry, tp_), what + "output");
    expect_close(xl.grad(), between_blocks(rx.grad(), tp_), what + "input gradient");
    const auto dw = layout.split(gathered(attention.qkv_proj->weight.grad(), 0, tp_));
    const auto db = layout.split(gathered(attention.qkv_proj->bias.grad(), 0, tp_));
    const at::Tensor* expected_w[] = {&rwq, &rwk, &rwv};
    const at::Tensor* expected_b[] = {&rbq, &rbk, &rbv};
    const char* names[] = {"q", "k", "v"};
    for (size_t i = 0; i < 3; ++i) {
      expect_close(dw[i], expected_w[i]->grad(), what + names[i] + " weight gradient");
      expect_close(db[i], expected_b[i]->grad(), what + names[i] + " bias gradient");
    }
  }
}

// hidden 12, intermediate 16: each rank holds its 16/tp rows of gate and of up.
TEST_P(FusedProjectionsTest, GateUpProjectionEqualsSeparateGateAndUp) {
  for (c10::ScalarType dtype : kDtypes) {
    const std::string what = where(dtype);
    const at::Tensor wg = seeded({16, 12}, 11, dtype, 0.5), wu = seeded({16, 12}, 12, dtype, 0.5);
    const at::Tensor wd = seeded({12, 16}, 13, dtype, 0.5);
    const at::Tensor x = seeded({kBatch, kSeq, 12}, 14, dtype), grad = seeded({kBatch, kSeq, 12}, 15, dtype);

    triax::SwiGluMlp mlp(12, 16, context(dtype));
    assign(mlp.gate_up_proj->weight, at::stack({shard_of(wg, 0, tp_), shard_of(wu, 0, tp_)}));
    assign(mlp.down_proj->weight, shard_of(wd, 1, tp_));
    at::Tensor xl = leaf(between_blocks(x, tp_));
    at::Tensor y = mlp.forward(xl);
    y.backward(between_blocks(grad, tp_));

    at::Tensor rx = leaf(x), rwg = leaf(wg), rwu = leaf(wu);
    const at::Tensor ry = at::linear(triax::swiglu(at::linear(rx, rwg), at::linear(rx, rwu)), wd);
    ry.backward(grad);

    expect_close(y, between_blocks(ry, tp_), what + "output");
    expect_close(xl.grad(), between_blocks(rx.grad(), tp_), what + "input gradient");
    const at::Tensor dw = gathered(mlp.gate_up_proj->weight.grad(), 1, tp_);  // [2, 16, 12]
    expect_close(dw[0], rwg.grad(), what + "gate weight gradient");
    expect_close(dw[1], rwu.grad(), what + "up weight gradient");
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, FusedProjectionsTest,
                         ::testing::Combine(::testing::Values(TpMode::AllReduce, TpMode::ReduceScatter),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<TpMode, bool>>& info) {
                           return std::string(std::get<0>(info.param) == TpMode::ReduceScatter ? "ReduceScatter"
                                                                                               : "AllReduce") +
                                  (std::get<1>(info.param) ? "Overlapped" : "");
                         });

}  // namespace
}  // namespace fused_projections_test
