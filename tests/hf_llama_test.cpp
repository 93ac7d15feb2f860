// Hugging Face Llama folders from C++ alone: the tensor names are the llama plugin's parameter
// names, model_config keys and defaults are the plugin's, write then read is exact, and a failed
// export leaves nothing behind. tests/interop/hf_llama_compat.py checks against transformers.
#include "triax/core/hf_llama.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "llama_config.hpp"
#include "llama_model.hpp"
#include "triax/config_reader.hpp"
#include "triax/core/hf_llama_config.hpp"
#include "triax/core/safetensors.hpp"
#include "triax/error.hpp"
#include "triax/plugin.hpp"

namespace fs = std::filesystem;
using triax::HfLlamaConfig;
using triax::llama::LlamaConfig;

namespace {

// hidden 16, 4 heads of 4, 2 kv heads, ffn 24, vocab 32, 2 layers.
std::string tiny_yaml(bool tied, bool bias = false) {
  return std::string("hidden_size: 16\nnum_attention_heads: 4\nnum_key_value_heads: 2\nintermediate_size: 24\n") +
         "num_hidden_layers: 2\nvocab_size: 32\nmax_position_embeddings: 32\nrms_norm_eps: 1.0e-5\n" +
         "rope_theta: 500000.0\ntie_word_embeddings: " + (tied ? "true" : "false") +
         "\nattention_bias: " + (bias ? "true" : "false") + "\n";
}

LlamaConfig plugin_read(const YAML::Node& node) {
  triax::ConfigReader reader(node, "model.model_config");
  return LlamaConfig::read(reader);
}

// Every field the two sides share.
void expect_same(const LlamaConfig& a, const LlamaConfig& b) {
  EXPECT_EQ(a.bos_token_id, b.bos_token_id);
  EXPECT_EQ(a.eos_token_id, b.eos_token_id);
  EXPECT_EQ(a.pad_token_id, b.pad_token_id);
  EXPECT_EQ(a.hidden_act, b.hidden_act);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.initializer_range, b.initializer_range);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.num_attention_heads, b.num_attention_heads);
  EXPECT_EQ(a.num_hidden_layers, b.num_hidden_layers);
  EXPECT_EQ(a.num_key_value_heads, b.num_key_value_heads);
  EXPECT_EQ(a.pretraining_tp, b.pretraining_tp);
  EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope_interleaved, b.rope_interleaved);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.use_cache, b.use_cache);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.attention_bias, b.attention_bias);
  ASSERT_EQ(a.rope_scaling.has_value(), b.rope_scaling.has_value());
  if (a.rope_scaling) {
    EXPECT_EQ(a.rope_scaling->type, b.rope_scaling->type);
    EXPECT_EQ(a.rope_scaling->factor, b.rope_scaling->factor);
    EXPECT_EQ(a.rope_scaling->low_freq_factor, b.rope_scaling->low_freq_factor);
    EXPECT_EQ(a.rope_scaling->high_freq_factor, b.rope_scaling->high_freq_factor);
    EXPECT_EQ(a.rope_scaling->original_max_position_embeddings, b.rope_scaling->original_max_position_embeddings);
  }
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const triax::Error& e) {
    return e.what();
  }
  return "(no error)";
}

class HfLlamaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("triax_hf_llama_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  static std::map<std::string, at::Tensor> random_weights(const HfLlamaConfig& config) {
    std::map<std::string, at::Tensor> out;
    for (const auto& [name, shape] : config.tensor_shapes()) out[name] = at::randn(shape);
    return out;
  }

  fs::path root_;
};

TEST_F(HfLlamaTest, TensorNamesAndShapesAreTheLlamaPluginsParameters) {
  for (bool tied : {false, true}) {
    for (bool bias : {false, true}) {
      const YAML::Node yaml = YAML::Load(tiny_yaml(tied, bias));
      triax::ModelContext context;
      context.dtype = at::kFloat;
      context.device = c10::Device(c10::kCPU);
      context.first_block = 0;
      context.last_block = 4;
      context.init_method = YAML::Load("{std: 0.02}");
      context.make_vocab_size_divisible_by = 1;
      triax::ConfigReader reader(yaml, "model.model_config");
      auto model = triax::llama::LlamaModel::create(reader, context);
      std::map<std::string, std::vector<int64_t>> plugin;
      for (const auto& p : model->parameter_table()) plugin[p.name] = p.spec.global_shape;

      const auto shapes = HfLlamaConfig::from_model_config(yaml).tensor_shapes();
      const std::map<std::string, std::vector<int64_t>> ours(shapes.begin(), shapes.end());
      EXPECT_EQ(ours.size(), shapes.size());
      EXPECT_EQ(ours, plugin) << "tied " << tied << " bias " << bias;
    }
  }
}

TEST_F(HfLlamaTest, ModelConfigDefaultsAreThePlugins) {
  const LlamaConfig defaults = plugin_read(YAML::Node(YAML::NodeType::Map));
  const HfLlamaConfig ours = HfLlamaConfig::from_model_config(YAML::Node(YAML::NodeType::Map));
  expect_same(plugin_read(ours.to_model_config()), defaults);
}

TEST_F(HfLlamaTest, ModelConfigRoundTripsThroughThePlugin) {
  const std::string full = tiny_yaml(true, true) +
                           "bos_token_id: 7\neos_token_id: 8\npad_token_id: 0\ninitializer_range: 0.041\n"
                           "use_cache: false\npretraining_tp: 2\n_attn_implementation: eager\n"
                           "rope_scaling: {rope_type: llama3, factor: 8.0, low_freq_factor: 1.0, "
                           "high_freq_factor: 4.0, original_max_position_embeddings: 16}\n";
  const YAML::Node node = YAML::Load(full);
  const YAML::Node back = HfLlamaConfig::from_model_config(node).to_model_config();
  expect_same(plugin_read(back), plugin_read(node));
  // Emitted and parsed again (as a config file would be): same values.
  YAML::Emitter emitter;
  emitter << back;
  expect_same(plugin_read(YAML::Load(emitter.c_str())), plugin_read(node));

  const YAML::Node linear = YAML::Load(tiny_yaml(false) + "rope_scaling: {type: linear, factor: 2.5}\n");
  expect_same(plugin_read(HfLlamaConfig::from_model_config(linear).to_model_config()), plugin_read(linear));
}

TEST_F(HfLlamaTest, ModelConfigRefusalsNameTheKey) {
  auto refused = [](const std::string& extra) {
    return error_of([&] { HfLlamaConfig::from_model_config(YAML::Load(tiny_yaml(false) + extra)); });
  };
  EXPECT_NE(refused("rope_interleaved: true\n").find("model.model_config.rope_interleaved"), std::string::npos);
  EXPECT_NE(refused("mystery: 1\n").find("model.model_config.mystery: unknown key"), std::string::npos);
  EXPECT_NE(refused("hidden_act: gelu\n").find("model.model_config.hidden_act"), std::string::npos);
  EXPECT_NE(refused("rope_scaling: {rope_type: yarn, factor: 2}\n").find("model.model_config.rope_scaling.rope_type"),
            std::string::npos);
}

TEST_F(HfLlamaTest, WriteThenReadIsExact) {
  at::manual_seed(3);
  for (bool tied : {false, true}) {
    for (int64_t shard_bytes : {int64_t{1} << 30, int64_t{3000}}) {
      const YAML::Node yaml = YAML::Load(tiny_yaml(tied, /*bias=*/true));
      const HfLlamaConfig config = HfLlamaConfig::from_model_config(yaml);
      const auto weights = random_weights(config);
      const fs::path folder = root_ / ("out_" + std::to_string(tied) + "_" + std::to_string(shard_bytes));
      triax::write_hf_llama(folder.string(), yaml, weights, at::kBFloat16, shard_bytes);

      const bool sharded = shard_bytes < (int64_t{1} << 30);
      EXPECT_EQ(fs::exists(folder / "model.safetensors"), !sharded);
      EXPECT_EQ(fs::exists(folder / "model.safetensors.index.json"), sharded);
      if (sharded) {
        // 3000 bytes per shard: each shard holds at most that much, or one larger tensor alone.
        size_t shards = 0;
        for (const auto& entry : fs::directory_iterator(folder)) {
          if (entry.path().extension() != ".safetensors") continue;
          ++shards;
          triax::SafetensorsFile shard(entry.path().string());
          int64_t bytes = 0;
          for (const auto& name : shard.names()) bytes += shard.nbytes(name);
          EXPECT_TRUE(bytes <= 3000 || shard.names().size() == 1) << entry.path();
          EXPECT_EQ(shard.metadata().at("format"), "pt");
        }
        EXPECT_GT(shards, 2u);
        char first[64];
        std::snprintf(first, sizeof first, "model-00001-of-%05zu.safetensors", shards);
        EXPECT_TRUE(fs::exists(folder / first)) << first;
      }

      const triax::HfLlamaModel model = triax::read_hf_llama(folder.string());
      EXPECT_EQ(model.dtype, at::kBFloat16);
      EXPECT_EQ(model.tensors.size(), weights.size());
      for (const auto& [name, tensor] : weights) {
        ASSERT_TRUE(model.tensors.count(name)) << name;
        EXPECT_TRUE(at::equal(model.tensors.at(name), tensor.to(at::kBFloat16))) << name;
      }
      EXPECT_EQ(model.tensors.count("lm_head.weight"), tied ? 0u : 1u);
      expect_same(plugin_read(model.model_config), plugin_read(yaml));
    }
  }
  // Nothing but the exports in the parent: the temporary folders were renamed away.
  for (const auto& entry : fs::directory_iterator(root_))
    EXPECT_EQ(entry.path().filename().string().rfind("out_", 0), 0u) << entry.path();
}

TEST_F(HfLlamaTest, TiedExportAcceptsAnEqualHeadOnly) {
  const YAML::Node yaml = YAML::Load(tiny_yaml(true));
  auto weights = random_weights(HfLlamaConfig::from_model_config(yaml));
  weights["lm_head.weight"] = weights.at("model.embed_tokens.weight").clone();
  triax::write_hf_llama((root_ / "equal").string(), yaml, weights, at::kFloat, 1 << 30);
  EXPECT_FALSE(triax::SafetensorsFile((root_ / "equal" / "model.safetensors").string()).contains("lm_head.weight"));
  weights["lm_head.weight"] += 1;
  EXPECT_NE(error_of([&] {
              triax::write_hf_llama((root_ / "differs").string(), yaml, weights, at::kFloat, 1 << 30);
            }).find("'lm_head.weight' differs"),
            std::string::npos);
}

TEST_F(HfLlamaTest, FailedExportsLeaveNothingBehind) {
  const YAML::Node yaml = YAML::Load(tiny_yaml(false));
  const HfLlamaConfig config = HfLlamaConfig::from_model_config(yaml);
  const std::string target = (root_ / "export").string();
  auto refused = [&](std::map<std::string, at::Tensor> weights, at::ScalarType dtype = at::kFloat,
                     int64_t shard_bytes = 1 << 30) {
    return error_of([&] { triax::write_hf_llama(target, yaml, weights, dtype, shard_bytes); });
  };
  const std::string q = "model.layers.1.self_attn.q_proj.weight";

  auto weights = random_weights(config);
  weights.erase(q);
  EXPECT_NE(refused(weights).find("tensor '" + q + "' is missing"), std::string::npos);

  weights = random_weights(config);
  weights[q] = at::zeros({16, 15});
  EXPECT_NE(refused(weights).find("'" + q + "' has shape [16, 15], but the model_config implies [16, 16]"),
            std::string::npos);

  weights = random_weights(config);
  weights["model.layers.2.mlp.up_proj.weight"] = at::zeros({24, 16});
  EXPECT_NE(refused(weights).find("unexpected tensor 'model.layers.2.mlp.up_proj.weight'"), std::string::npos);

  weights = random_weights(config);
  weights[q] = at::zeros({16, 16}, at::kInt);
  EXPECT_NE(refused(weights).find("'" + q + "' has dtype Int"), std::string::npos);

  EXPECT_NE(refused(random_weights(config), at::kDouble).find("cannot export weights as Double"), std::string::npos);
  EXPECT_NE(refused(random_weights(config), at::kFloat, 0).find("shard size limit must be positive"),
            std::string::npos);
  EXPECT_TRUE(fs::is_empty(root_)) << "a refused export left something behind";

  // An existing folder with content is never replaced; an empty one is.
  fs::create_directories(target);
  std::ofstream(fs::path(target) / "keep.txt") << "mine";
  EXPECT_NE(refused(random_weights(config)).find("already exists"), std::string::npos);
  EXPECT_TRUE(fs::exists(fs::path(target) / "keep.txt"));
  fs::remove(fs::path(target) / "keep.txt");
  triax::write_hf_llama(target, yaml, random_weights(config), at::kFloat, 1 << 30);
  EXPECT_TRUE(fs::exists(fs::path(target) / "config.json"));
}

TEST_F(HfLlamaTest, FoldersWithoutUsableWeightsAreRefused) {
  EXPECT_NE(error_of([&] { triax::read_hf_llama((root_ / "absent").string()); }).find("not a folder"),
            std::string::npos);
  const YAML::Node yaml = YAML::Load(tiny_yaml(false));
  const fs::path folder = root_ / "model";
  triax::write_hf_llama(folder.string(), yaml, random_weights(HfLlamaConfig::from_model_config(yaml)), at::kFloat,
                        1 << 30);
  std::ofstream(folder / "model.safetensors.index.json") << "{\"weight_map\": {}}";
  EXPECT_NE(error_of([&] { triax::read_hf_llama(folder.string()); }).find("holds both model.safetensors and"),
            std::string::npos);
  fs::remove(folder / "model.safetensors.index.json");
  fs::remove(folder / "model.safetensors");
  EXPECT_NE(error_of([&] { triax::read_hf_llama(folder.string()); }).find("no weights"), std::string::npos);
  fs::remove(folder / "config.json");
  EXPECT_NE(error_of([&] { triax::read_hf_llama(folder.string()); }).find("config.json: cannot open"),
            std::string::npos);
}

}  // namespace
