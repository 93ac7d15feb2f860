// Inference with a cache on one rank: the Llama plugin's logits computed token by token through
// its per-sequence caches equal those of one full forward over the whole sequence (fp32, 1e-5):
// a prefix then one token at a time, a batch whose rows hold different lengths, several new
// tokens on top of a cache, two pipeline stages joined by hidden_out. Then the refusals: a prompt
// longer than the cache, a cache of another instance, a model plugin without a cache (through the
// host's ModelInstance, also for a plugin built before ABI 1.3).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cache_test_support.hpp"
#include "llama_model.hpp"
#include "triax/core/plugins/plugin_instances.hpp"
#include "triax/error.hpp"
#include "triax/generate/model_cache.hpp"
#include "triax/plugin.hpp"

namespace {

using namespace cache_test;
using triax::llama::LlamaModel;

// hidden 16, 4 heads of 4, 2 kv heads (GQA), ffn 24, 2 layers, vocab 30 padded to 32.
std::string tiny_yaml(bool tied) {
  return "hidden_size: 16\nnum_attention_heads: 4\nnum_key_value_heads: 2\nintermediate_size: 24\n"
         "num_hidden_layers: 2\nvocab_size: 30\nmax_position_embeddings: 24\nrms_norm_eps: 1.0e-5\n"
         "tie_word_embeddings: " +
         std::string(tied ? "true" : "false") + "\n";
}

triax::ModelContext context_of(int first_block, int last_block, int pp_rank = 0, int pp_size = 1) {
  triax::ModelContext context;
  context.first_block = first_block;
  context.last_block = last_block;
  context.pp_rank = pp_rank;
  context.pp_size = pp_size;
  context.seed = 1234;
  context.init_method = YAML::Load("{std: 0.2}");  // large enough that every position matters
  context.make_vocab_size_divisible_by = 16;
  return context;
}

std::shared_ptr<LlamaModel> build(bool tied, const triax::ModelContext& context = context_of(0, 4)) {
  triax::ConfigReader reader = triax::ConfigReader::from_text(tiny_yaml(tied), "model.model_config");
  return LlamaModel::create(reader, context);
}

at::Tensor tokens(int64_t rows, int64_t length, uint64_t seed) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randint(30, {rows, length}, generator, at::kLong);
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

TEST(InferenceCache, PrefixThenTokenByTokenEqualsFullForward) {
  for (bool tied : {false, true}) {
    auto model = build(tied);
    const at::Tensor ids = tokens(2, 12, 5);
    const at::Tensor expected = full_logits(*model, ids);
    auto caches = make_caches(*model, 2, 16);
    std::vector<at::Tensor> pieces{cached_logits(*model, pointers(caches), ids.narrow(1, 0, 5))};
    for (int64_t t = 5; t < 12; ++t) pieces.push_back(cached_logits(*model, pointers(caches), ids.narrow(1, t, 1)));
    const at::Tensor logits = at::cat(pieces, 1);
    ASSERT_EQ(logits.sizes(), expected.sizes());
    EXPECT_LT(max_abs_diff(logits, expected), 1e-5) << (tied ? "tied" : "untied");
    EXPECT_EQ(caches[0]->length(), 12);
    EXPECT_EQ(caches[1]->capacity(), 16);
  }
}

// Row 0 holds 3 tokens, row 1 holds 7; then both decode one token per forward, and finally take
// three new tokens each at once (a prefill on top of a cache, causal among themselves).
TEST(InferenceCache, RowsOfDifferentLengthsDecodeTogether) {
  auto model = build(false);
  const at::Tensor a = tokens(1, 12, 11), b = tokens(1, 14, 12);
  const at::Tensor expected_a = full_logits(*model, a), expected_b = full_logits(*model, b);
  auto caches = make_caches(*model, 2, 20);
  cached_logits(*model, {caches[0].get()}, a.narrow(1, 0, 3));
  cached_logits(*model, {caches[1].get()}, b.narrow(1, 0, 7));
  for (int64_t step = 0; step < 4; ++step) {
    const at::Tensor ids = at::cat({a.narrow(1, 3 + step, 1), b.narrow(1, 7 + step, 1)}, 0);
    const at::Tensor logits = cached_logits(*model, pointers(caches), ids);
    EXPECT_LT(max_abs_diff(logits[0], expected_a[0].narrow(0, 3 + step, 1)), 1e-5) << "step " << step;
    EXPECT_LT(max_abs_diff(logits[1], expected_b[0].narrow(0, 7 + step, 1)), 1e-5) << "step " << step;
  }
  const at::Tensor ids = at::cat({a.narrow(1, 7, 3), b.narrow(1, 11, 3)}, 0);
  const at::Tensor logits = cached_logits(*model, pointers(caches), ids);
  EXPECT_LT(max_abs_diff(logits[0], expected_a[0].narrow(0, 7, 3)), 1e-5);
  EXPECT_LT(max_abs_diff(logits[1], expected_b[0].narrow(0, 11, 3)), 1e-5);
  EXPECT_EQ(caches[0]->length(), 10);
  EXPECT_EQ(caches[1]->length(), 14);
}

// The rows of one forward share one K/V store per layer; caches of different capacities move
// between stores when the rows are grouped differently: rows 0 and 2 prefilled together, row 1
// alone, all three decoding together, then rows 2 and 0 (a subset, in the other order), row 1 two
// tokens alone, rows 0 and 2, and all three again. Each row's logits stay those of its own full forward.
TEST(InferenceCache, RowsRegroupedBetweenForwardsKeepTheirTokens) {
  auto model = build(true);
  const std::vector<at::Tensor> ids{tokens(1, 12, 21), tokens(1, 12, 22), tokens(1, 12, 23)};
  std::vector<at::Tensor> expected;
  for (const at::Tensor& row : ids) expected.push_back(full_logits(*model, row)[0]);
  std::vector<std::unique_ptr<triax::InferenceCache>> caches;
  for (int64_t capacity : {12, 16, 20}) caches.push_back(model->create_cache(capacity));
  auto run = [&](const std::vector<size_t>& rows, int64_t start, int64_t count) {
    std::vector<triax::InferenceCache*> group;
    std::vector<at::Tensor> input;
    for (size_t r : rows) {
      group.push_back(caches[r].get());
      input.push_back(ids[r].narrow(1, start, count));
    }
    const at::Tensor logits = cached_logits(*model, group, at::cat(input, 0));
    for (size_t k = 0; k < rows.size(); ++k)
      EXPECT_LT(max_abs_diff(logits[static_cast<int64_t>(k)], expected[rows[k]].narrow(0, start, count)), 1e-5)
          << "row " << rows[k] << " at " << start;
  };
  run({0, 2}, 0, 5);
  run({1}, 0, 5);
  for (int64_t t = 5; t < 8; ++t) run({0, 1, 2}, t, 1);
  run({2, 0}, 8, 1);
  run({1}, 8, 2);
  run({0, 2}, 9, 1);
  run({0, 1, 2}, 10, 1);
  EXPECT_EQ(caches[0]->length(), 11);
  EXPECT_EQ(caches[2]->length(), 11);
}

// Two pipeline stages, each with its own caches: stage 0's hidden_out feeds stage 1.
TEST(InferenceCache, PipelineStagesJoinedByHiddenOut) {
  for (bool tied : {false, true}) {
    auto whole = build(tied);
    auto first = build(tied, context_of(0, 2, 0, 2));   // embedding + layer 0
    auto second = build(tied, context_of(2, 4, 1, 2));  // layer 1 + head
    const at::Tensor ids = tokens(2, 9, 21);
    const at::Tensor expected = full_logits(*whole, ids);
    auto caches0 = make_caches(*first, 2, 9), caches1 = make_caches(*second, 2, 9);
    std::vector<at::Tensor> pieces;
    const std::vector<std::pair<int64_t, int64_t>> chunks{{0, 4}, {4, 1}, {5, 1}, {6, 3}};  // (start, count)
    for (auto [start, count] : chunks) {
      triax::StageInput input;
      input.input_ids = ids.narrow(1, start, count);
      triax::StageOutput out0 = first->forward_cached(pointers(caches0), input);
      ASSERT_TRUE(out0.hidden_out.defined());
      EXPECT_FALSE(out0.logits.defined());
      input.hidden_in = out0.hidden_out;
      pieces.push_back(second->forward_cached(pointers(caches1), input).logits);
    }
    EXPECT_LT(max_abs_diff(at::cat(pieces, 1), expected), 1e-5) << (tied ? "tied" : "untied");
  }
}

// The message of the triax::Error `body` throws, or a note that it threw none.
template <class Body>
std::string error_of(Body&& body, triax_status expected_status) {
  try {
    body();
  } catch (const triax::Error& e) {
    EXPECT_EQ(e.status(), expected_status) << e.what();
    return e.what();
  }
  return "(no error)";
}

TEST(InferenceCache, RefusesWhatDoesNotFit) {
  auto model = build(false);
  auto caches = make_caches(*model, 2, 6);
  const std::string longer =
      error_of([&] { cached_logits(*model, pointers(caches), tokens(2, 7, 31)); }, TRIAX_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(longer.find("llama: row 0 holds 0 tokens; 7 more exceed its cache's capacity of 6 tokens"),
            std::string::npos)
      << longer;
  EXPECT_EQ(caches[0]->length(), 0);  // refused before anything changed
  cached_logits(*model, pointers(caches), tokens(2, 4, 32));
  const std::string later =
      error_of([&] { cached_logits(*model, pointers(caches), tokens(2, 3, 33)); }, TRIAX_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(later.find("row 0 holds 4 tokens; 3 more exceed"), std::string::npos) << later;
  EXPECT_EQ(caches[1]->length(), 4);

  const std::string positions = error_of([&] { model->create_cache(25); }, TRIAX_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(positions.find("a cache of 25 tokens exceeds the model's 24 positions"), std::string::npos) << positions;
  const std::string rows =
      error_of([&] { cached_logits(*model, {caches[0].get()}, tokens(2, 1, 34)); }, TRIAX_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(rows.find("input_ids has 2 rows for 1 caches"), std::string::npos) << rows;
  auto other = build(false);
  auto foreign = other->create_cache(6);
  const std::string owner =
      error_of([&] { cached_logits(*model, {foreign.get()}, tokens(1, 1, 35)); }, TRIAX_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(owner.find("made by another model instance"), std::string::npos) << owner;
}

// ---- through the ABI and the host --------------------------------------------------------------

triax_model_context c_context() {
  triax_model_context context{};
  context.struct_size = sizeof(context);
  context.tp_size = context.pp_size = context.dp_size = 1;
  context.first_block = 0;
  context.last_block = 4;
  context.device = "cpu";
  context.dtype = "float32";
  context.seed = 1234;
  context.init_method_yaml = "{std: 0.2}";
  context.make_vocab_size_divisible_by = 16;
  return context;
}

TEST(InferenceCacheHost, CachedForwardThroughTheAbi) {
  const triax_model_vtable& vtable = *triax::detail::ModelAdapter<LlamaModel>::vtable();
  triax::ModelInstance instance(vtable, "llama", tiny_yaml(true), c_context());
  triax::CachedModel model(instance);
  ASSERT_TRUE(model.has_inference_cache());
  auto reference = build(true);
  const at::Tensor ids = tokens(1, 8, 41);
  const at::Tensor expected = full_logits(*reference, ids);
  triax::ModelCache cache = model.create_cache(8);
  std::vector<triax::ModelCache*> caches{&cache};
  at::Tensor prefix = model.forward_cached(caches, ids.narrow(1, 0, 6)).logits;
  EXPECT_EQ(cache.length(), 6);
  at::Tensor rest = model.forward_cached(caches, ids.narrow(1, 6, 2)).logits;
  EXPECT_LT(max_abs_diff(at::cat({prefix, rest}, 1), expected), 1e-5);
  try {
    model.forward_cached(caches, ids.narrow(1, 0, 1));
    ADD_FAILURE() << "a ninth token was accepted into a cache of 8";
  } catch (const triax::Error& e) {
    EXPECT_NE(std::string(e.what()).find("model plugin 'llama': llama: row 0 holds 8 tokens"), std::string::npos)
        << e.what();
  }
}

// A model that implements no cache: the SDK's defaults refuse, and the host names the plugin.
class NoCacheModel : public triax::Model {
 public:
  static std::vector<double> block_costs(triax::ConfigReader& config, int64_t) {
    config.finish();
    return {1.0};
  }
  static std::shared_ptr<NoCacheModel> create(triax::ConfigReader& config, const triax::ModelContext&) {
    config.finish();
    return std::make_shared<NoCacheModel>();
  }
  triax::StageOutput forward(const triax::StageInput&) override { return {}; }
  double flops_per_token(int64_t) const override { return 0.0; }
  int64_t total_parameters() const override { return 0; }
  std::string resolved_config() const override { return "{}"; }
};

TEST(InferenceCacheHost, ModelWithoutCacheIsRefusedByName) {
  triax_model_context context = c_context();
  context.last_block = 1;
  const triax_model_vtable& vtable = *triax::detail::ModelAdapter<NoCacheModel>::vtable();
  triax::ModelInstance instance(vtable, "no_cache", "{}", context);
  triax::CachedModel model(instance);
  const std::string refused = error_of([&] { model.create_cache(4); }, TRIAX_ERROR_UNSUPPORTED);
  EXPECT_NE(refused.find("model plugin 'no_cache': this model has no inference cache"), std::string::npos) << refused;

  // A plugin built before ABI 1.3: its vtable ends before the cache members, which the host
  // never reads; it refuses by the plugin's name instead.
  triax_model_vtable old = *triax::detail::ModelAdapter<LlamaModel>::vtable();
  old.struct_size = offsetof(triax_model_vtable, nanotron_marker);
  triax::ModelInstance old_instance(old, "llama_1_2", tiny_yaml(false), c_context());
  triax::CachedModel old_model(old_instance);
  EXPECT_FALSE(old_model.has_inference_cache());
  const std::string old_refused = error_of([&] { old_model.create_cache(4); }, TRIAX_ERROR_UNSUPPORTED);
  EXPECT_NE(old_refused.find("model plugin 'llama_1_2' offers no inference cache"), std::string::npos)
      << old_refused;
}

}  // namespace
