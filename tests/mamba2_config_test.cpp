// The mamba2 plugin's configuration: Hugging Face's Mamba2Config keys with its defaults, the
// refusals of bad input naming the key (n_groups that do not divide the heads or split over tp,
// chunk_size <= 0, heads that do not fill the mixer), and its Hugging Face mapping: the tensor map
// covers the parameter table, config.json round-trips, and what it cannot represent is refused.
#include <gtest/gtest.h>

#include <cmath>

#include "causal_lm_checks.hpp"
#include "error_of.hpp"
#include "mamba2_test_support.hpp"
#include "triax/error.hpp"

namespace {

using namespace mamba2_test;
using triax::mamba2::Mamba2Config;
using triax::test::error_of;

Mamba2Config read(const std::string& yaml) {
  ConfigReader reader = ConfigReader::from_text(yaml, "model.model_config");
  return Mamba2Config::read(reader);
}

void expect_refusal(const std::string& yaml, const std::string& key, const std::string& text) {
  const std::string error = error_of([&] { read(yaml); });
  EXPECT_NE(error.find("model.model_config." + key), std::string::npos) << error;
  EXPECT_NE(error.find(text), std::string::npos) << error;
}

TEST(Mamba2Config, ReadsHuggingFaceKeysWithDefaults) {
  ConfigReader reader = ConfigReader::from_text("is_mamba2_config: true\nhidden_size: 64\nnum_heads: 16\nhead_dim: 8\n",
                                                "model.model_config");
  const Mamba2Config c = Mamba2Config::read(reader);
  EXPECT_EQ(c.d_inner(), 128);
  EXPECT_EQ(c.n_groups, 8);
  EXPECT_EQ(c.chunk_size, 256);
  EXPECT_EQ(c.conv_dim(), 128 + 2 * 8 * 128);
  EXPECT_EQ(c.projection_size(), 128 + c.conv_dim() + 16);
  EXPECT_EQ(reader.resolved()["state_size"].as<int>(), 128);
  EXPECT_TRUE(reader.resolved()["time_step_limit"].IsNull());
  EXPECT_FALSE(std::isfinite(c.time_step_limit_high));
}

TEST(Mamba2Config, RefusesBadInputNamingTheKey) {
  const std::string shape = "hidden_size: 16\nnum_heads: 8\nhead_dim: 4\n";
  expect_refusal(shape + "n_groups: 3\n", "n_groups", "3 groups do not divide num_heads (8)");
  expect_refusal(shape + "n_groups: 2\nchunk_size: 0\n", "chunk_size", "must be positive, got 0");
  expect_refusal(shape + "n_groups: 2\nchunk_size: -4\n", "chunk_size", "must be positive, got -4");
  expect_refusal("hidden_size: 16\nnum_heads: 8\nhead_dim: 3\nn_groups: 2\n", "num_heads",
                 "num_heads x head_dim = 8 x 3 = 24 must equal expand x hidden_size = 2 x 16 = 32");
  expect_refusal(shape + "n_groups: 2\ntime_step_limit: [0.5, 0.1]\n", "time_step_limit", "0 <= low <= high");
  expect_refusal(shape + "n_groups: 2\nhidden_act: gelu\n", "hidden_act", "silu");
  expect_refusal(shape + "n_groups: 2\nstate_sise: 4\n", "state_sise", "");
  expect_refusal(shape + "is_mamba2_config: false\n", "is_mamba2_config", "needs is_mamba2_config: true");
}

// The vocabulary the data loader checks token ids against comes from the plugin's own reader: its
// default where the key is missing, and a refusal naming the key where it is not a count.
TEST(Mamba2Model, GivesItsVocabularyThroughItsStrictReader) {
  const std::string shape = "hidden_size: 16\nnum_heads: 8\nhead_dim: 4\nn_groups: 2\n";
  ConfigReader given = ConfigReader::from_text(shape + "vocab_size: 300\n", "model.model_config");
  EXPECT_EQ(triax::mamba2::Mamba2Model::vocab_size(given), 300);
  ConfigReader missing = ConfigReader::from_text(shape, "model.model_config");
  EXPECT_EQ(triax::mamba2::Mamba2Model::vocab_size(missing), read(shape).vocab_size);
  const std::string error = error_of([&] {
    ConfigReader bad = ConfigReader::from_text(shape + "vocab_size: many\n", "model.model_config");
    triax::mamba2::Mamba2Model::vocab_size(bad);
  });
  EXPECT_NE(error.find("model.model_config.vocab_size"), std::string::npos) << error;
}

// Tensor parallelism shards whole groups of heads (the tp 2 runs are in mamba2_parity).
TEST(Mamba2Model, RefusesGroupsTensorParallelismWouldSplitNamingTheKey) {
  ModelContext context = tiny_model_context();
  context.tp_size = 4;
  const std::string groups = error_of([&] { build(tiny_yaml(false), context); });
  EXPECT_NE(groups.find("model.model_config.n_groups"), std::string::npos) << groups;
  EXPECT_NE(groups.find("2 groups are not divisible by the tensor parallel size 4"), std::string::npos) << groups;
}

// The tensor map names every parameter with its whole shape; config.json round-trips.
TEST(Mamba2HfMapping, TensorMapCoversTheParameterTableAndConfigRoundTrips) {
  for (const std::string& yaml :
       std::vector<std::string>{tiny_yaml(true), tiny_yaml(false, "use_bias: true\nuse_conv_bias: false\n"
                                                                  "time_step_limit: [0.01, 2.0]\npad_token_id: 3\n")}) {
    auto model = build(yaml);
    const triax::HfMapping mapping = Mamba2Model::hf_mapping();
    triax::test::expect_tensor_map_covers_parameters(mapping, yaml, *model);

    ConfigReader to = ConfigReader::from_text(yaml, "model.model_config");
    const std::string json = mapping.config_to_hf(to, "float32");
    ConfigReader back_reader = ConfigReader::from_text(json, "", "config.json");
    const YAML::Node back = mapping.config_from_hf(back_reader);
    ConfigReader again(YAML::Clone(back), "model.model_config");
    const Mamba2Config a = read(yaml), b = Mamba2Config::read(again);
    EXPECT_EQ(a.d_inner(), b.d_inner());
    EXPECT_EQ(a.n_groups, b.n_groups);
    EXPECT_EQ(a.chunk_size, b.chunk_size);
    EXPECT_EQ(a.conv_kernel, b.conv_kernel);
    EXPECT_EQ(a.use_bias, b.use_bias);
    EXPECT_EQ(a.use_conv_bias, b.use_conv_bias);
    EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
    EXPECT_EQ(a.pad_token_id, b.pad_token_id);
    EXPECT_EQ(a.time_step_limit_low, b.time_step_limit_low);
    EXPECT_EQ(a.time_step_limit_high, b.time_step_limit_high);
    EXPECT_TRUE(back["is_mamba2_config"].as<bool>());
  }
}

std::string from_hf(const std::string& json) {
  ConfigReader reader = ConfigReader::from_text(json, "", "config.json");
  return triax::to_yaml_text(Mamba2Model::hf_mapping().config_from_hf(reader));
}

std::string hf_config(const std::string& extra) {
  return R"({"architectures": ["Mamba2ForCausalLM"], "model_type": "mamba2", "hidden_size": 16,
             "num_hidden_layers": 2, "vocab_size": 32, "num_heads": 8, "head_dim": 4, "n_groups": 2,
             "state_size": 4, "time_step_rank": 1, )" +
         extra + "}";
}

TEST(Mamba2HfMapping, ReadsConfigJsonAndRefusesWhatItCannotRepresent) {
  // transformers writes an unbounded limit as {"__float__": "Infinity"}: no clamp.
  const YAML::Node unbounded = YAML::Load(from_hf(hf_config(R"("time_step_limit": [0.0, {"__float__": "Infinity"}])")));
  EXPECT_EQ(unbounded["n_groups"].as<int>(), 2);
  EXPECT_FALSE(unbounded["time_step_limit"].IsDefined());
  const YAML::Node bounded = YAML::Load(from_hf(hf_config(R"("time_step_limit": [0.0, 0.5])")));
  EXPECT_DOUBLE_EQ(bounded["time_step_limit"][1].as<double>(), 0.5);

  const std::string lower = error_of([] { from_hf(hf_config(R"("time_step_limit": [0.1, {"__float__": "Infinity"}])")); });
  EXPECT_NE(lower.find("config.json"), std::string::npos) << lower;
  EXPECT_NE(lower.find("time_step_limit"), std::string::npos) << lower;
  const std::string groups = error_of([] { from_hf(hf_config(R"("chunk_size": 0)")); });
  EXPECT_NE(groups.find("config.json"), std::string::npos) << groups;
  EXPECT_NE(groups.find("chunk_size"), std::string::npos) << groups;
  const std::string act = error_of([] { from_hf(hf_config(R"("hidden_act": "gelu")")); });
  EXPECT_NE(act.find("hidden_act"), std::string::npos) << act;
  std::string mamba1 = hf_config(R"("use_bias": false)");
  mamba1.replace(mamba1.find("Mamba2ForCausalLM"), 17, "MambaForCausalLM");
  const std::string architecture = error_of([&] { from_hf(mamba1); });
  EXPECT_NE(architecture.find("architectures"), std::string::npos) << architecture;
}

}  // namespace
