// The nemotron_h plugin: bad input refused before anything is built, naming the key (an unknown
// pattern letter, a pattern whose length is not num_hidden_layers, n_groups not dividing the Mamba
// heads or not divisible by tp, chunk_size <= 0, E layers without their MoE keys, MoE keys without
// E layers, moe_latent_size, experts not divisible by ep); the tensor map covers the parameter
// table and config.json round-trips; the logits through the generation cache (conv and SSM state
// per Mamba-2 layer, K/V per attention layer) equal the full forward's; recomputation changes
// nothing; E layers report their router losses.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cache_test_support.hpp"
#include "causal_lm_checks.hpp"
#include "error_of.hpp"
#include "model_reference_support.hpp"
#include "nemotron_h_model.hpp"
#include "router_losses.hpp"
#include "triax/config_reader.hpp"

namespace {

using triax::ConfigReader;
using triax::ModelContext;
using triax::nemotron_h::NemotronHConfig;
using triax::nemotron_h::NemotronHModel;
using triax::test::error_of;
using triax::test::max_abs_diff;
using triax::test::random_tokens;
using triax::test::tiny_model_context;

// hidden 16; Mamba-2: 8 heads of 4 in 2 groups, state 4, conv 3, chunks of 4; attention: 4 heads
// of 8 over 2 K/V heads; MLP 24; vocab 30. `extra`: "key: value" lines that replace or add keys.
std::string tiny_yaml(const std::string& pattern, const std::string& extra = "") {
  std::map<std::string, std::string> keys = {
      {"hidden_size", "16"},   {"vocab_size", "30"},        {"num_attention_heads", "4"}, {"num_key_value_heads", "2"},
      {"head_dim", "8"},       {"intermediate_size", "24"}, {"mamba_num_heads", "8"},     {"mamba_head_dim", "4"},
      {"ssm_state_size", "4"}, {"n_groups", "2"},           {"conv_kernel", "3"},         {"chunk_size", "4"}};
  std::istringstream lines(extra);
  for (std::string line; std::getline(lines, line);) {
    const size_t colon = line.find(": ");
    keys[line.substr(0, colon)] = line.substr(colon + 2);
  }
  std::string yaml = "hybrid_override_pattern: \"" + pattern + "\"\n";
  for (const auto& [key, value] : keys) yaml += key + ": " + value + "\n";
  return yaml;
}

// The E layers' keys: 4 experts in 2 groups, 2 per token from the best 2 groups, experts of 12,
// a shared expert of 20.
const std::string kMoeKeys =
    "n_routed_experts: 4\nnum_experts_per_tok: 2\nmoe_intermediate_size: 12\n"
    "moe_shared_expert_intermediate_size: 20\nn_group: 2\ntopk_group: 2\nrouted_scaling_factor: 1.5\n";

// The whole model on one rank: its pattern's layers and the embedding and head blocks.
std::shared_ptr<NemotronHModel> build(const std::string& pattern, const std::string& extra = "", int tp_size = 1,
                                      bool recompute = false, int ep_size = 1) {
  ModelContext context = tiny_model_context(0, static_cast<int>(pattern.size()) + 2);
  context.tp_size = tp_size;
  context.ep_size = ep_size;
  context.recompute_layer = recompute;
  ConfigReader reader = ConfigReader::from_text(tiny_yaml(pattern, extra), "model.model_config");
  return NemotronHModel::create(reader, context);
}

void expect_refusal(const std::string& pattern, const std::string& extra, const std::string& key,
                    const std::string& text, int tp_size = 1, int ep_size = 1) {
  const std::string error = error_of([&] { build(pattern, extra, tp_size, false, ep_size); });
  EXPECT_NE(error.find("model.model_config." + key), std::string::npos) << error;
  EXPECT_NE(error.find(text), std::string::npos) << error;
}

TEST(NemotronHConfig, RefusesBadInputNamingTheKey) {
  expect_refusal("M-X*", "", "hybrid_override_pattern", "unknown letter 'X' at layer 2");
  expect_refusal("M-M*", "num_hidden_layers: 3\n", "num_hidden_layers",
                 "is 3, but hybrid_override_pattern \"M-M*\" has 4 letters");
  expect_refusal("M-M*", "n_groups: 3\n", "n_groups", "3 groups do not divide mamba_num_heads (8)");
  expect_refusal("M-M*", "chunk_size: 0\n", "chunk_size", "must be positive, got 0");
  expect_refusal("M-M*", "chunk_size: -2\n", "chunk_size", "must be positive, got -2");
  expect_refusal("M-M*", "mlp_hidden_act: gelu\n", "mlp_hidden_act", "relu2");
  expect_refusal("M-M*", "num_key_value_heads: 3\n", "num_key_value_heads", "not divisible");
  const std::string missing = error_of([] {
    ConfigReader reader = ConfigReader::from_text("hidden_size: 16\n", "model.model_config");
    NemotronHConfig::read(reader);
  });
  EXPECT_NE(missing.find("model.model_config.hybrid_override_pattern"), std::string::npos) << missing;
}

TEST(NemotronHConfig, RefusesMoeLayersWithoutTheirKeysNamingTheKey) {
  expect_refusal("M-E*", "", "n_routed_experts", "");
  expect_refusal("M-E*", "n_routed_experts: 4\nnum_experts_per_tok: 2\nmoe_shared_expert_intermediate_size: 8\n",
                 "moe_intermediate_size", "");
  expect_refusal("M-M*", "n_routed_experts: 4\n", "n_routed_experts", "");  // no E layer: not a key
  expect_refusal("ME", kMoeKeys + "moe_latent_size: 8\n", "moe_latent_size", "no latent projection");
  expect_refusal("ME", kMoeKeys + "num_experts_per_tok: 5\n", "num_experts_per_tok", "larger than num_experts (4)");
  expect_refusal("ME", kMoeKeys + "n_group: 3\n", "n_group", "3 does not divide num_experts (4)");
  expect_refusal("ME", kMoeKeys + "moe_intermediate_size: 0\n", "moe_intermediate_size", "must be positive");
  expect_refusal("ME", kMoeKeys + "router_aux_loss_coef: -1\n", "router_aux_loss_coef", "must not be negative");
  expect_refusal("ME", kMoeKeys + "token_dispatcher_type: ring\n", "token_dispatcher_type", "alltoall");
  expect_refusal("ME", kMoeKeys + "mlp_bias: true\n", "mlp_bias", "shared expert has no biases");
  expect_refusal("ME", kMoeKeys, "n_routed_experts", "4 is not divisible by parallelism.expert_parallel_size (3)", 1,
                 3);
  expect_refusal("ME", kMoeKeys + "n_groups: 1\n", "moe_shared_expert_intermediate_size",
                 "20 is not divisible by the tensor parallel size 3", 3);
}

TEST(NemotronHConfig, RefusesWhatTensorParallelismWouldSplitNamingTheKey) {
  expect_refusal("M-M", "", "n_groups", "2 groups are not divisible by the tensor parallel size 4", 4);
  expect_refusal("*-", "n_groups: 1\n", "num_attention_heads", "4 is not divisible by the tensor parallel size 3", 3);
}

TEST(NemotronHHfMapping, TensorMapCoversTheParameterTableAndConfigRoundTrips) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"M-M*-", "pad_token_id: 3\n"},
      {"*M-", "mlp_bias: true\nuse_bias: true\nuse_conv_bias: false\n"},
      {"M*EM-E", kMoeKeys}};
  for (const auto& [pattern, extra] : cases) {
    const std::string yaml = tiny_yaml(pattern, extra);
    auto model = build(pattern, extra);
    const triax::HfMapping mapping = NemotronHModel::hf_mapping();
    triax::test::expect_tensor_map_covers_parameters(mapping, yaml, *model);
    int64_t held = 0;
    for (const auto& p : model->parameter_table()) held += p.tensor.numel();
    EXPECT_EQ(model->total_parameters(), held);

    ConfigReader to = ConfigReader::from_text(yaml, "model.model_config");
    const std::string json = mapping.config_to_hf(to, "float32");
    ConfigReader back_reader = ConfigReader::from_text(json, "", "config.json");
    ConfigReader again(YAML::Clone(mapping.config_from_hf(back_reader)), "model.model_config");
    ConfigReader original = ConfigReader::from_text(yaml, "model.model_config");
    const NemotronHConfig a = NemotronHConfig::read(original), b = NemotronHConfig::read(again);
    EXPECT_EQ(a.hybrid_override_pattern, b.hybrid_override_pattern);
    EXPECT_EQ(a.mamba.d_inner(), b.mamba.d_inner());
    EXPECT_EQ(a.mamba.n_groups, b.mamba.n_groups);
    EXPECT_EQ(a.mamba.use_bias, b.mamba.use_bias);
    EXPECT_EQ(a.mlp_bias, b.mlp_bias);
    EXPECT_EQ(a.pad_token_id, b.pad_token_id);
    EXPECT_EQ(a.moe_block.has_value(), b.moe_block.has_value());
    if (a.moe_block) {
      EXPECT_EQ(a.moe_block->parameter_count(), b.moe_block->parameter_count());
      EXPECT_EQ(a.moe_block->n_group, b.moe_block->n_group);
      EXPECT_EQ(a.moe_block->routed_scaling_factor, b.moe_block->routed_scaling_factor);
    }
    EXPECT_NE(json.find("\"full_attention\""), std::string::npos) << json;
  }
}

// transformers' NemotronHForCausalLM never ties its lm_head: a tied model is not exported.
TEST(NemotronHHfMapping, RefusesToExportTiedEmbeddingsNamingTheKey) {
  ConfigReader reader = ConfigReader::from_text(tiny_yaml("M-", "tie_word_embeddings: true\n"), "model.model_config");
  const std::string error = error_of([&] { NemotronHModel::hf_mapping().config_to_hf(reader, "float32"); });
  EXPECT_NE(error.find("model.model_config.tie_word_embeddings"), std::string::npos) << error;
  EXPECT_NE(error.find("never ties"), std::string::npos) << error;
}

// Each kind of layer continues its own cache: a prompt longer than a chunk, then one and three tokens.
TEST(NemotronHCache, PromptThenFewTokensAtATimeEqualsTheFullForward) {
  using namespace cache_test;
  auto model = build("M*-M*");
  const at::Tensor ids = random_tokens(2, 14, 11);
  const at::Tensor expected = full_logits(*model, ids);
  std::vector<std::unique_ptr<triax::InferenceCache>> caches;
  EXPECT_LT(max_abs_diff(prompt_then_steps_logits(*model, ids, 6, 11, caches), expected), 1e-5);
  EXPECT_EQ(caches[1]->length(), 14);
}

// An E layer keeps nothing between steps: its tokens are routed one by one.
TEST(NemotronHCache, MoeLayersThroughTheCacheEqualTheFullForward) {
  using namespace cache_test;
  auto model = build("ME*E", kMoeKeys);
  const at::Tensor ids = random_tokens(2, 14, 12);
  std::vector<std::unique_ptr<triax::InferenceCache>> caches;
  EXPECT_LT(max_abs_diff(prompt_then_steps_logits(*model, ids, 6, 11, caches), full_logits(*model, ids)), 1e-5);
}

TEST(NemotronHModel, MoeLayersNameTheirRouterLosses) {
  const std::vector<std::string> names = build("ME", kMoeKeys)->aux_loss_names();
  for (const std::string& loss : triax::moe::router_loss_names())
    EXPECT_NE(std::find(names.begin(), names.end(), loss), names.end()) << loss;
  EXPECT_TRUE(build("M*")->aux_loss_names().empty());
}

TEST(NemotronHModel, RecomputationChangesNothing) {
  triax::test::expect_recomputation_changes_nothing([](bool recompute) { return build("M*-M", "", 1, recompute); },
                                                    random_tokens(2, 9, 5), random_tokens(2, 9, 6));
}

}  // namespace
