// Inference with a cache at tp > 1 (every rank of a real multi-process tensor-parallel group),
// both tp_modes: each rank's vocabulary shard of the cached incremental logits equals the same
// slice of the single-rank full forward's logits (fp32, 1e-5). In REDUCE_SCATTER mode a forward
// of a token count that tp does not divide (one new token while decoding) runs padded.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "llama_model.hpp"
#include "multi_rank_environment.hpp"
#include "triax/core/comm/communicator.hpp"

// A namespace of this file's own: the multi-rank test files compile together (tests/multi_rank.cmake)
// and share names such as kSeq or toy_vtable.
namespace inference_cache_tp_test {
namespace {

using triax::TpMode;

// hidden 16, 4 heads of 4, 2 kv heads (GQA), ffn 24, 2 layers, vocab 30 padded to 32, tied.
const std::string kTinyLlama =
    "hidden_size: 16\nnum_attention_heads: 4\nnum_key_value_heads: 2\nintermediate_size: 24\n"
    "num_hidden_layers: 2\nvocab_size: 30\nmax_position_embeddings: 32\nrms_norm_eps: 1.0e-5\n"
    "tie_word_embeddings: true\n";

class InferenceCacheTpTest : public ::testing::TestWithParam<TpMode> {
 protected:
  void SetUp() override {
    triax::MeshShape shape;
    shape.tp = triax::testing::world_size();
    services_ = std::make_unique<triax::HostServices>(triax::testing::communicator(shape));
    host_ = triax::Host(services_->c_host());
    ASSERT_GT(host_.size(TRIAX_GROUP_TP), 1) << "run these tests with at least two ranks";
  }

  std::shared_ptr<triax::llama::LlamaModel> build(bool parallel) const {
    triax::ModelContext context;
    if (parallel) {
      context.tp_rank = host_.rank(TRIAX_GROUP_TP);
      context.tp_size = host_.size(TRIAX_GROUP_TP);
      context.tp_mode = GetParam();
      context.host = host_;
    }
    context.first_block = 0;
    context.last_block = 4;
    context.seed = 1234;
    context.init_method = YAML::Load("{std: 0.2}");
    context.make_vocab_size_divisible_by = 8;
    triax::ConfigReader reader = triax::ConfigReader::from_text(kTinyLlama, "model.model_config");
    return triax::llama::LlamaModel::create(reader, context);
  }

  // This rank's vocabulary slice of whole logits [.., .., 32].
  at::Tensor my_shard(const at::Tensor& logits) const {
    return logits.chunk(host_.size(TRIAX_GROUP_TP), -1)[host_.rank(TRIAX_GROUP_TP)];
  }

  std::unique_ptr<triax::HostServices> services_;
  triax::Host host_;
};

at::Tensor tokens(int64_t rows, int64_t length, uint64_t seed) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randint(30, {rows, length}, generator, at::kLong);
}

at::Tensor full_logits(triax::llama::LlamaModel& model, const at::Tensor& ids) {
  at::NoGradGuard no_grad;
  triax::StageInput input;
  input.input_ids = ids;
  input.want_logits = true;
  return model.forward(input).logits;
}

at::Tensor cached_logits(triax::llama::LlamaModel& model, const std::vector<triax::InferenceCache*>& caches,
                         const at::Tensor& ids) {
  triax::StageInput input;
  input.input_ids = ids;
  return model.forward_cached(caches, input).logits;
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

TEST_P(InferenceCacheTpTest, PrefixThenTokenByTokenEqualsSingleRankFullForward) {
  if (2 % host_.size(TRIAX_GROUP_TP) != 0) GTEST_SKIP() << "the tiny model's 2 kv heads do not split";
  auto reference = build(false);
  auto model = build(true);
  const at::Tensor ids = tokens(2, 11, 7);
  const at::Tensor expected = my_shard(full_logits(*reference, ids));
  auto first = model->create_cache(16), second = model->create_cache(16);
  std::vector<triax::InferenceCache*> caches{first.get(), second.get()};
  std::vector<at::Tensor> pieces{cached_logits(*model, caches, ids.narrow(1, 0, 5))};
  for (int64_t t = 5; t < 11; ++t) pieces.push_back(cached_logits(*model, caches, ids.narrow(1, t, 1)));
  const at::Tensor logits = at::cat(pieces, 1);
  ASSERT_EQ(logits.sizes(), expected.sizes());
  EXPECT_LT(max_abs_diff(logits, expected), 1e-5);
  EXPECT_EQ(first->length(), 11);
}

TEST_P(InferenceCacheTpTest, RowsOfDifferentLengthsEqualSingleRankFullForward) {
  if (2 % host_.size(TRIAX_GROUP_TP) != 0) GTEST_SKIP() << "the tiny model's 2 kv heads do not split";
  auto reference = build(false);
  auto model = build(true);
  const at::Tensor a = tokens(1, 9, 17), b = tokens(1, 12, 18);
  const at::Tensor expected_a = my_shard(full_logits(*reference, a));
  const at::Tensor expected_b = my_shard(full_logits(*reference, b));
  auto row_a = model->create_cache(12), row_b = model->create_cache(12);
  cached_logits(*model, {row_a.get()}, a.narrow(1, 0, 2));
  cached_logits(*model, {row_b.get()}, b.narrow(1, 0, 5));
  for (int64_t step = 0; step < 4; ++step) {
    const at::Tensor ids = at::cat({a.narrow(1, 2 + step, 1), b.narrow(1, 5 + step, 1)}, 0);
    const at::Tensor logits = cached_logits(*model, {row_a.get(), row_b.get()}, ids);
    EXPECT_LT(max_abs_diff(logits[0], expected_a[0].narrow(0, 2 + step, 1)), 1e-5) << "step " << step;
    EXPECT_LT(max_abs_diff(logits[1], expected_b[0].narrow(0, 5 + step, 1)), 1e-5) << "step " << step;
  }
  const at::Tensor ids = at::cat({a.narrow(1, 6, 3), b.narrow(1, 9, 3)}, 0);
  const at::Tensor logits = cached_logits(*model, {row_a.get(), row_b.get()}, ids);
  EXPECT_LT(max_abs_diff(logits[0], expected_a[0].narrow(0, 6, 3)), 1e-5);
  EXPECT_LT(max_abs_diff(logits[1], expected_b[0].narrow(0, 9, 3)), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Modes, InferenceCacheTpTest, ::testing::Values(TpMode::AllReduce, TpMode::ReduceScatter),
                         [](const ::testing::TestParamInfo<TpMode>& info) {
                           return std::string(info.param == TpMode::ReduceScatter ? "ReduceScatter" : "AllReduce");
                         });

}  // namespace
}  // namespace inference_cache_tp_test
