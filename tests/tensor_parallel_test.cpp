// The SDK's tensor-parallel layers and the Llama model at tp > 1, run by every rank of a real
// multi-process tensor-parallel group, against the plain (unsharded) computation that every rank
// also does on its own from the same seeded full tensors. For each layer and both tp_modes the
// outputs, the input gradients and the gathered weight gradients must equal the reference's.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/function.h>

#include <map>
#include <string>
#include <vector>

#include "llama_model.hpp"
#include "tensor_parallel_group.hpp"
#include "triax/config_reader.hpp"
#include "triax/error.hpp"
#include "triax/layers/cross_entropy.hpp"
#include "triax/layers/embedding.hpp"
#include "triax/layers/fused_linear_cross_entropy.hpp"
#include "triax/layers/linear.hpp"
#include "triax/layers/norm.hpp"
#include "triax/layers/tensor_parallel_ops.hpp"

namespace {

using triax::TensorParallel;
using triax::TpMode;

const char* mode_name(TpMode mode) { return mode == TpMode::ReduceScatter ? "REDUCE_SCATTER" : "ALL_REDUCE"; }

// ---- this rank's group ---------------------------------------------------------------------

// The whole world is one tensor-parallel group (tp = the number of ranks mpirun started).
class TensorParallelTest : public ::testing::TestWithParam<TpMode> {
 protected:
  void SetUp() override {
    world_ = triax::testing::world_tensor_parallel(GetParam());
    tp_ = world_.tp;
    ASSERT_GT(tp_.size, 1) << "run these tests with at least two ranks";
  }

  triax::testing::WorldTensorParallel world_;
  TensorParallel tp_;
};

// ---- helpers ---------------------------------------------------------------------------------

using triax::testing::between_blocks;
using triax::testing::gathered;
using triax::testing::leaf;
using triax::testing::seeded;
using triax::testing::shard_of;

void expect_close(const at::Tensor& actual, const at::Tensor& expected, const std::string& what) {
  triax::testing::expect_close(actual, expected, what, expected.scalar_type() == at::kDouble ? 1e-12 : 1e-6);
}

// Whether a node whose name contains `name` lies on the autograd graph behind `t`.
bool graph_has_node(const at::Tensor& t, const std::string& name) {
  std::vector<torch::autograd::Node*> pending = {t.grad_fn().get()};
  while (!pending.empty()) {
    torch::autograd::Node* node = pending.back();
    pending.pop_back();
    if (node == nullptr) continue;
    if (node->name().find(name) != std::string::npos) return true;
    for (const torch::autograd::Edge& edge : node->next_edges()) pending.push_back(edge.function.get());
  }
  return false;
}

const c10::ScalarType kDtypes[] = {at::kFloat, at::kDouble};
constexpr int64_t kBatch = 2, kSeq = 8, kIn = 12, kOut = 16;

// ---- the communication ops -------------------------------------------------------------------

TEST_P(TensorParallelTest, SequenceGatherAndReduceScatterAreAdjoint) {
  for (c10::ScalarType dtype : kDtypes) {
    at::Tensor full = seeded({kBatch, kSeq, kIn}, 1, dtype);
    at::Tensor grad = seeded({kBatch, kSeq, kIn}, 2, dtype);
    // all-gather: each rank's shard joins into the whole; backward sums every rank's gradient.
    at::Tensor shard = leaf(shard_of(full, 1, tp_));
    at::Tensor joined = triax::all_gather_sequence(shard, tp_);
    expect_close(joined, full, "all_gather_sequence forward");
    (joined * grad * (tp_.rank + 1)).sum().backward();
    const double ranks_sum = tp_.size * (tp_.size + 1) / 2.0;
    expect_close(shard.grad(), shard_of(grad, 1, tp_) * ranks_sum, "all_gather_sequence backward");

    // reduce-scatter: rank r contributes (r + 1) x full; backward gathers the shards' gradients.
    at::Tensor partial = leaf(full * (tp_.rank + 1));
    at::Tensor reduced = triax::reduce_scatter_sequence(partial, tp_);
    expect_close(reduced, shard_of(full, 1, tp_) * ranks_sum, "reduce_scatter_sequence forward");
    (reduced * shard_of(grad, 1, tp_)).sum().backward();
    expect_close(partial.grad(), grad, "reduce_scatter_sequence backward");
  }
}

// ---- linear layers ---------------------------------------------------------------------------

// Blocking, and with the collective overlapping the GEMMs (tp_linear_async_communication), which
// must take its own autograd path.
TEST_P(TensorParallelTest, ColumnParallelLinearMatchesPlainLinear) {
  for (c10::ScalarType dtype : kDtypes) for (bool overlap : {false, true}) {
    const at::Tensor w = seeded({kOut, kIn}, 11, dtype), b = seeded({kOut}, 12, dtype);
    const at::Tensor x = seeded({kBatch, kSeq, kIn}, 13, dtype), g = seeded({kBatch, kSeq, kOut}, 14, dtype);
    at::Tensor rx = leaf(x), rw = leaf(w), rb = leaf(b);
    at::Tensor ry = at::linear(rx, rw, rb);
    (ry * g).sum().backward();

    TensorParallel tp = tp_;
    tp.overlap_communication = overlap;
    triax::ColumnParallelLinear layer({kIn, kOut, true, c10::kCPU, dtype}, tp);
    triax::testing::assign(layer.weight, shard_of(w, 0, tp_));
    triax::testing::assign(layer.bias, shard_of(b, 0, tp_));
    at::Tensor px = leaf(between_blocks(x, tp_));
    at::Tensor py = layer.forward(px);  // [b, s, out/tp] in both modes
    EXPECT_EQ(graph_has_node(py, "Overlapped"), overlap);
    (py * shard_of(g, 2, tp_)).sum().backward();

    const std::string where = std::string(mode_name(tp_.mode)) + (overlap ? " overlapped " : " ") +
                              c10::toString(dtype) + ": ";
    expect_close(gathered(py, 2, tp_), ry, where + "output");
    expect_close(px.grad(), between_blocks(rx.grad(), tp_), where + "input gradient");
    expect_close(gathered(layer.weight.grad(), 0, tp_), rw.grad(), where + "weight gradient");
    expect_close(gathered(layer.bias.grad(), 0, tp_), rb.grad(), where + "bias gradient");
  }
}

TEST_P(TensorParallelTest, RowParallelLinearMatchesPlainLinear) {
  for (c10::ScalarType dtype : kDtypes) {
    const at::Tensor w = seeded({kOut, kIn}, 21, dtype), b = seeded({kOut}, 22, dtype);
    const at::Tensor x = seeded({kBatch, kSeq, kIn}, 23, dtype), g = seeded({kBatch, kSeq, kOut}, 24, dtype);
    at::Tensor rx = leaf(x), rw = leaf(w), rb = leaf(b);
    at::Tensor ry = at::linear(rx, rw, rb);
    (ry * g).sum().backward();

    triax::RowParallelLinear layer({kIn, kOut, true, c10::kCPU, dtype}, tp_);
    triax::testing::assign(layer.weight, shard_of(w, 1, tp_));
    triax::testing::assign(layer.bias, b);
    at::Tensor px = leaf(shard_of(x, 2, tp_));  // this rank's input features, whole sequence
    at::Tensor py = layer.forward(px);          // whole (ALL_REDUCE) or sequence shard
    (py * between_blocks(g, tp_)).sum().backward();

    const std::string where = std::string(mode_name(tp_.mode)) + " " + c10::toString(dtype) + ": ";
    expect_close(py, between_blocks(ry, tp_), where + "output");
    expect_close(gathered(px.grad(), 2, tp_), rx.grad(), where + "input gradient");
    expect_close(gathered(layer.weight.grad(), 1, tp_), rw.grad(), where + "weight gradient");
    expect_close(layer.bias.grad(), rb.grad(), where + "bias gradient (replicated, whole on every rank)");
  }
}

// Column then row, as attention and the MLP use them: the activations between blocks keep their
// layout (whole, or sequence shards) and the input gradient crosses both collectives.
TEST_P(TensorParallelTest, ColumnThenRowMatchesPlainLayers) {
  const c10::ScalarType dtype = at::kDouble;
  const at::Tensor w1 = seeded({kOut, kIn}, 31, dtype), w2 = seeded({kIn, kOut}, 32, dtype);
  const at::Tensor x = seeded({kBatch, kSeq, kIn}, 33, dtype), g = seeded({kBatch, kSeq, kIn}, 34, dtype);
  at::Tensor rx = leaf(x);
  at::Tensor ry = at::linear(at::gelu(at::linear(rx, w1)), w2);
  (ry * g).sum().backward();

  triax::ColumnParallelLinear column({kIn, kOut, false, c10::kCPU, dtype}, tp_);
  triax::RowParallelLinear row({kOut, kIn, false, c10::kCPU, dtype}, tp_);
  triax::testing::assign(column.weight, shard_of(w1, 0, tp_));
  triax::testing::assign(row.weight, shard_of(w2, 1, tp_));
  at::Tensor px = leaf(between_blocks(x, tp_));
  at::Tensor py = row.forward(at::gelu(column.forward(px)));
  (py * between_blocks(g, tp_)).sum().backward();
  expect_close(py, between_blocks(ry, tp_), std::string(mode_name(tp_.mode)) + " output");
  expect_close(px.grad(), between_blocks(rx.grad(), tp_), std::string(mode_name(tp_.mode)) + " input gradient");
}

// ---- embedding and norm ----------------------------------------------------------------------

TEST_P(TensorParallelTest, VocabParallelEmbeddingMatchesPlainEmbedding) {
  for (c10::ScalarType dtype : kDtypes) {
    const int64_t vocab = 13, padded = 16;  // real ids stay below 13; rows 13..15 are padding
    const at::Tensor w = seeded({padded, kIn}, 41, dtype), g = seeded({kBatch, kSeq, kIn}, 42, dtype);
    at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(43);
    const at::Tensor ids = at::randint(vocab, {kBatch, kSeq}, generator, at::kLong);
    at::Tensor rw = leaf(w);
    at::Tensor ry = at::embedding(rw, ids);
    (ry * g).sum().backward();

    triax::VocabParallelEmbedding layer(padded, kIn, c10::kCPU, dtype, tp_);
    EXPECT_EQ(layer.vocab_start(), tp_.rank * (padded / tp_.size));
    triax::testing::assign(layer.weight, shard_of(w, 0, tp_));
    at::Tensor py = layer.forward(ids);
    (py * between_blocks(g, tp_)).sum().backward();

    const std::string where = std::string(mode_name(tp_.mode)) + " " + c10::toString(dtype) + ": ";
    expect_close(py, between_blocks(ry, tp_), where + "output");
    expect_close(gathered(layer.weight.grad(), 0, tp_), rw.grad(), where + "weight gradient");
  }
}

TEST_P(TensorParallelTest, RmsNormWeightGradientCoversTheWholeSequence) {
  for (c10::ScalarType dtype : kDtypes) {
    const at::Tensor w = seeded({kIn}, 51, dtype);
    const at::Tensor x = seeded({kBatch, kSeq, kIn}, 52, dtype), g = seeded({kBatch, kSeq, kIn}, 53, dtype);
    triax::RMSNorm reference(kIn, 1e-5, c10::kCPU, dtype);
    triax::testing::assign(reference.weight, w);
    at::Tensor rx = leaf(x);
    (reference.forward(rx) * g).sum().backward();

    triax::RMSNorm norm(kIn, 1e-5, c10::kCPU, dtype, tp_);
    triax::testing::assign(norm.weight, w);
    at::Tensor px = leaf(between_blocks(x, tp_));
    at::Tensor py = norm.forward(px);
    (py * between_blocks(g, tp_)).sum().backward();

    const std::string where = std::string(mode_name(tp_.mode)) + " " + c10::toString(dtype) + ": ";
    expect_close(px.grad(), between_blocks(rx.grad(), tp_), where + "input gradient");
    expect_close(norm.weight.grad(), reference.weight.grad(), where + "weight gradient");
  }
}

// ---- vocab-parallel cross-entropy ------------------------------------------------------------

// Against at::cross_entropy on the whole (unpadded) logits: loss and logits gradient, with
// padded columns and masked tokens. vocab 5 padded to 8: at tp = 4 the last shard holds only
// padding, at tp = 2 the second shard holds one real column and three padded ones.
TEST_P(TensorParallelTest, VocabParallelCrossEntropyMatchesCrossEntropy) {
  for (c10::ScalarType dtype : kDtypes) {
    for (int64_t vocab : {5, 8, 14}) {
      const int64_t padded = (vocab + 7) / 8 * 8, tokens = 24;
      const at::Tensor logits = seeded({tokens, padded}, 61, dtype) * 3.0;
      at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(62 + static_cast<uint64_t>(vocab));
      const at::Tensor labels = at::randint(vocab, {tokens}, generator, at::kLong);
      at::Tensor mask = at::ones({tokens}, at::kFloat);
      mask.narrow(0, 3, 4).zero_();

      at::Tensor rl = leaf(logits);
      at::Tensor per_token = at::cross_entropy_loss(rl.narrow(1, 0, vocab), labels, {}, at::Reduction::None);
      at::Tensor m = mask.to(dtype);
      at::Tensor reference = (per_token * m).sum() / m.sum();
      reference.backward();

      at::Tensor pl = leaf(shard_of(logits, 1, tp_));
      at::Tensor loss = triax::vocab_parallel_cross_entropy(pl, labels, mask, tp_.rank * pl.size(1), vocab, tp_);
      loss.backward();
      const std::string where = std::string(c10::toString(dtype)) + " vocab " + std::to_string(vocab) + ": ";
      expect_close(loss, reference, where + "loss");
      expect_close(gathered(pl.grad(), 1, tp_), rl.grad(), where + "logits gradient (padded columns 0)");
    }
  }
}

// The fused lm_head + cross-entropy at tp > 1 against the unfused single-rank path (at::linear
// over the whole padded vocabulary, then cross-entropy), both tp_modes: the hidden states reach it
// through the column-parallel gather, as in Llama. Chunks of 5 tokens (16 tokens: a short last
// chunk); vocab 5 padded to 8 leaves the last rank at tp = 4 only padding.
TEST_P(TensorParallelTest, FusedLinearCrossEntropyMatchesUnfusedPath) {
  for (c10::ScalarType dtype : kDtypes) {
    for (int64_t vocab : {5, 14}) {
      const int64_t padded = (vocab + 7) / 8 * 8, tokens = kBatch * kSeq;
      const at::Tensor x = seeded({kBatch, kSeq, kIn}, 71, dtype), w = seeded({padded, kIn}, 72, dtype);
      at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(73 + static_cast<uint64_t>(vocab));
      const at::Tensor labels = at::randint(vocab, {tokens}, generator, at::kLong);
      at::Tensor mask = at::ones({tokens}, at::kFloat);
      mask.narrow(0, 2, 5).zero_();

      TensorParallel single;
      at::Tensor rx = leaf(x), rw = leaf(w);
      at::Tensor reference = triax::vocab_parallel_cross_entropy(at::linear(rx, rw).reshape({tokens, padded}), labels,
                                                                 mask, 0, vocab, single);
      reference.backward();

      at::Tensor px = leaf(between_blocks(x, tp_)), pw = leaf(shard_of(w, 0, tp_));
      at::Tensor head_input = triax::gather_column_parallel_input(px, tp_).reshape({tokens, kIn});
      at::Tensor loss = triax::fused_linear_cross_entropy(head_input, pw, labels, mask, tp_.rank * pw.size(0), vocab,
                                                          tp_, /*chunk_tokens=*/5);
      loss.backward();

      const std::string where =
          std::string(mode_name(tp_.mode)) + " " + c10::toString(dtype) + " vocab " + std::to_string(vocab) + ": ";
      expect_close(loss, reference, where + "loss");
      expect_close(px.grad(), between_blocks(rx.grad(), tp_), where + "hidden gradient");
      expect_close(gathered(pw.grad(), 0, tp_), rw.grad(), where + "weight gradient (padded rows 0)");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, TensorParallelTest, ::testing::Values(TpMode::AllReduce, TpMode::ReduceScatter),
                         [](const ::testing::TestParamInfo<TpMode>& info) {
                           return std::string(info.param == TpMode::ReduceScatter ? "ReduceScatter" : "AllReduce");
                         });

// ---- the Llama model -------------------------------------------------------------------------

// hidden 16, 4 heads of 4, 2 kv heads (GQA), ffn 24, 2 layers, vocab 30 padded to 32, tied.
const std::string kTinyLlama =
    "hidden_size: 16\nnum_attention_heads: 4\nnum_key_value_heads: 2\nintermediate_size: 24\n"
    "num_hidden_layers: 2\nvocab_size: 30\nmax_position_embeddings: 32\nrms_norm_eps: 1.0e-5\n"
    "tie_word_embeddings: true\n";

triax::ModelContext llama_context(const TensorParallel& tp, c10::ScalarType dtype) {
  triax::ModelContext context;
  context.tp_rank = tp.rank;
  context.tp_size = tp.size;
  context.tp_mode = tp.mode;
  context.host = tp.host;
  context.dtype = dtype;
  context.first_block = 0;
  context.last_block = 4;
  context.seed = 1234;
  context.init_method = YAML::Load("{std: 0.2}");  // large enough that every layer matters
  context.make_vocab_size_divisible_by = 8;
  return context;
}

std::shared_ptr<triax::llama::LlamaModel> build_llama(const triax::ModelContext& context) {
  triax::ConfigReader reader = triax::ConfigReader::from_text(kTinyLlama, "model.model_config");
  return triax::llama::LlamaModel::create(reader, context);
}

// Loss, then the gradient of every parameter gathered into its global shape.
std::pair<at::Tensor, std::map<std::string, at::Tensor>> loss_and_gradients(triax::llama::LlamaModel& model,
                                                                            const TensorParallel& tp) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(77);
  triax::StageInput input;
  input.input_ids = at::randint(30, {2, 8}, generator, at::kLong);
  input.label_ids = at::randint(30, {2, 8}, generator, at::kLong);
  input.label_mask = at::ones({2, 8}, at::kFloat);
  input.label_mask[1][5].fill_(0.0);
  at::Tensor loss = model.forward(input).loss;
  loss.backward();
  std::map<std::string, at::Tensor> gradients;
  for (const triax::NamedParameter& p : model.parameter_table()) {
    at::Tensor grad = p.tensor.grad();
    for (size_t dim = 0; dim < p.spec.global_shape.size(); ++dim)
      if (grad.size(static_cast<int64_t>(dim)) != p.spec.global_shape[dim])
        grad = gathered(grad, static_cast<int64_t>(dim), tp);
    gradients[p.name] = grad;
  }
  return {loss.detach(), gradients};
}

TEST_P(TensorParallelTest, TinyLlamaMatchesSingleRank) {
  if (2 % tp_.size != 0) GTEST_SKIP() << "the tiny model's 2 kv heads do not split over " << tp_.size << " ranks";
  for (c10::ScalarType dtype : kDtypes) {
    TensorParallel single;  // tp = 1: the reference, computed on every rank
    auto reference = build_llama(llama_context(single, dtype));
    auto [reference_loss, reference_gradients] = loss_and_gradients(*reference, single);

    auto model = build_llama(llama_context(tp_, dtype));
    auto [loss, gradients] = loss_and_gradients(*model, tp_);
    const std::string where = std::string(mode_name(tp_.mode)) + " " + c10::toString(dtype) + ": ";
    expect_close(loss, reference_loss, where + "loss");
    ASSERT_EQ(gradients.size(), reference_gradients.size());
    // Gradients pass through many more roundings than one layer's: a looser bound in fp32.
    for (const auto& [name, expected] : reference_gradients) {
      ASSERT_EQ(gradients.count(name), 1u) << name;
      const double scale = std::max(expected.abs().max().item<double>(), 1e-30);
      const double error = (gradients[name].to(at::kDouble) - expected.to(at::kDouble)).abs().max().item<double>();
      EXPECT_LE(error / scale, dtype == at::kDouble ? 1e-11 : 1e-5) << where << name;
    }
  }
}

// parallelism.recompute_layer at tp > 1: each layer's collectives run again in backward (the
// forward's, then their adjoints), in the same order on every rank, and the loss and every
// gradient equal those of the same model keeping its activations.
TEST_P(TensorParallelTest, TinyLlamaRecomputedMatchesKeptActivations) {
  if (2 % tp_.size != 0) GTEST_SKIP() << "the tiny model's 2 kv heads do not split over " << tp_.size << " ranks";
  for (c10::ScalarType dtype : kDtypes) {
    auto kept = build_llama(llama_context(tp_, dtype));
    auto [kept_loss, kept_gradients] = loss_and_gradients(*kept, tp_);
    triax::ModelContext context = llama_context(tp_, dtype);
    context.recompute_layer = true;
    auto recomputed = build_llama(context);
    auto [loss, gradients] = loss_and_gradients(*recomputed, tp_);
    const std::string where = std::string(mode_name(tp_.mode)) + " " + c10::toString(dtype) + " recomputed: ";
    expect_close(loss, kept_loss, where + "loss");
    ASSERT_EQ(gradients.size(), kept_gradients.size());
    for (const auto& [name, expected] : kept_gradients) {
      ASSERT_EQ(gradients.count(name), 1u) << name;
      expect_close(gradients[name], expected, where + name);
    }
  }
}

// bf16 parameters (reductions in fp32 where the layers compute in fp32): the loss stays within
// bf16 rounding of the single-rank bf16 loss.
TEST_P(TensorParallelTest, TinyLlamaInBfloat16) {
  if (2 % tp_.size != 0) GTEST_SKIP() << "the tiny model's 2 kv heads do not split over " << tp_.size << " ranks";
  TensorParallel single;
  auto reference = build_llama(llama_context(single, at::kBFloat16));
  auto model = build_llama(llama_context(tp_, at::kBFloat16));
  const double reference_loss = loss_and_gradients(*reference, single).first.item<double>();
  const double loss = loss_and_gradients(*model, tp_).first.item<double>();
  EXPECT_NEAR(loss, reference_loss, 2e-2 * reference_loss) << mode_name(tp_.mode);
}

// A bad split is refused by every rank before any collective: no rank waits on another.
TEST_P(TensorParallelTest, BadSplitFailsOnEveryRankWithoutHanging) {
  triax::ModelContext context = llama_context(tp_, at::kFloat);
  triax::ConfigReader reader = triax::ConfigReader::from_text(
      "hidden_size: 16\nnum_attention_heads: 4\nnum_key_value_heads: 1\nintermediate_size: 24\n", "model.model_config");
  try {
    triax::llama::LlamaModel::create(reader, context);
    ADD_FAILURE() << "num_key_value_heads 1 was accepted at tp " << tp_.size;
  } catch (const triax::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("model.model_config.num_key_value_heads"), std::string::npos) << e.what();
  }
  tp_.host.barrier(TRIAX_GROUP_TP);  // every rank got here
}

}  // namespace
