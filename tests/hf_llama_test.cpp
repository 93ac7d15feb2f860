// The llama plugin's Hugging Face mapping, through the ABI as the host uses it: its tensor map is
// the plugin's parameters, config.json <-> model_config round-trips through the plugin's own
// reader, refusals name config.json or model.model_config and the key, write then read of a
// folder is exact, and a failed export leaves nothing behind. tests/interop/hf_llama_compat.py
// checks the same folders against transformers.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "error_of.hpp"
#include "llama_config.hpp"
#include "llama_model.hpp"
#include "triax/config_reader.hpp"
#include "triax/convert/hf_conversion.hpp"
#include "triax/convert/hf_weights.hpp"
#include "triax/convert/model_hf_mapping.hpp"
#include "triax/error.hpp"
#include "triax/interop/safetensors.hpp"
#include "triax/layers/grouped_query_attention.hpp"

namespace fs = std::filesystem;
using triax::llama::LlamaConfig;
using Json = nlohmann::json;

namespace {

// hidden 16, 4 heads of 4, 2 kv heads, ffn 24, vocab 32, 2 layers.
std::string tiny_yaml(bool tied, bool bias = false) {
  return std::string("hidden_size: 16\nnum_attention_heads: 4\nnum_key_value_heads: 2\nintermediate_size: 24\n") +
         "num_hidden_layers: 2\nvocab_size: 32\nmax_position_embeddings: 32\nrms_norm_eps: 1.0e-5\n" +
         "rope_theta: 500000.0\ntie_word_embeddings: " + (tied ? "true" : "false") +
         "\nattention_bias: " + (bias ? "true" : "false") + "\n";
}

// The plugin's resolved model_config: every field, defaults included, as one comparable text.
std::string resolved(const std::string& yaml) {
  triax::ConfigReader reader(YAML::Load(yaml), "model.model_config");
  LlamaConfig::read(reader);
  return triax::to_yaml_text(reader.resolved());
}

using triax::test::error_of;

class HfLlamaTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    registry_ = new triax::PluginRegistry();
    registry_->scan_folder(TRIAX_TEST_PLUGIN_DIR);
    mapping_ = new triax::ModelHfMapping(*registry_, "llama");
  }
  static void TearDownTestSuite() {
    delete mapping_;
    delete registry_;
  }
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("triax_hf_llama_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // model_config -> config.json -> model_config.
  static std::string round_trip(const std::string& yaml) {
    return mapping_->config_from_hf(mapping_->config_to_hf(yaml, "float32").first, "config.json");
  }
  static std::map<std::string, at::Tensor> random_weights(const std::string& yaml) {
    std::map<std::string, at::Tensor> out;
    for (const triax::HfTensorRule& rule : mapping_->tensor_map(yaml))
      if (rule.kind != TRIAX_HF_IGNORE && !rule.optional) out[rule.triax_name] = at::randn(rule.shape);
    return out;
  }
  void write(const std::string& yaml, const std::map<std::string, at::Tensor>& weights, const fs::path& folder,
             at::ScalarType dtype = at::kFloat, int64_t shard_bytes = 1 << 30) {
    triax::checkpoint::write_hf_model(*registry_, "llama", yaml, weights, dtype, shard_bytes, folder.string());
  }
  std::string config_json_refusal(const std::function<void(Json&)>& edit) {
    Json config = Json::parse(mapping_->config_to_hf(tiny_yaml(false), "float32").first);
    edit(config);
    return error_of<triax::Error>([&] { mapping_->config_from_hf(config.dump(), "/x/config.json"); });
  }

  static triax::PluginRegistry* registry_;
  static triax::ModelHfMapping* mapping_;
  fs::path root_;
};
triax::PluginRegistry* HfLlamaTest::registry_ = nullptr;
triax::ModelHfMapping* HfLlamaTest::mapping_ = nullptr;

TEST_F(HfLlamaTest, TheTensorMapIsThePluginsParameters) {
  for (bool tied : {false, true}) {
    for (bool bias : {false, true}) {
      const std::string yaml = tiny_yaml(tied, bias);
      triax::ModelContext context;
      context.last_block = 4;
      context.init_method = YAML::Load("{std: 0.02}");
      triax::ConfigReader reader(YAML::Load(yaml), "model.model_config");
      auto model = triax::llama::LlamaModel::create(reader, context);
      std::map<std::string, std::vector<int64_t>> plugin, mapped;
      for (const auto& p : model->parameter_table()) plugin[p.name] = p.spec.global_shape;
      for (const triax::HfTensorRule& rule : mapping_->tensor_map(yaml)) {
        if (rule.kind == TRIAX_HF_IGNORE || rule.optional) continue;
        mapped[rule.triax_name] = rule.shape;
        // The fused projections read and write Hugging Face's separate tensors; the rest renames.
        const std::string& name = rule.triax_name;
        const size_t qkv = name.find("qkv_proj."), gate_up = name.find("gate_up_proj.");
        if (qkv != std::string::npos) {
          const std::string prefix = name.substr(0, qkv), what = name.substr(qkv + 9);
          EXPECT_EQ(rule.kind, TRIAX_HF_INTERLEAVE) << name;
          EXPECT_EQ(rule.dim, 1) << name;
          EXPECT_EQ(rule.hf_sizes, (std::vector<int64_t>{8, 4, 4})) << name;  // 2 query heads, a key, a value
          EXPECT_EQ(rule.hf_names, (std::vector<std::string>{prefix + "q_proj." + what, prefix + "k_proj." + what,
                                                             prefix + "v_proj." + what}));
        } else if (gate_up != std::string::npos) {
          const std::string prefix = name.substr(0, gate_up);
          EXPECT_EQ(rule.kind, TRIAX_HF_STACK) << name;
          EXPECT_EQ(rule.dim, 0) << name;
          EXPECT_EQ(rule.hf_names, (std::vector<std::string>{prefix + "gate_proj.weight", prefix + "up_proj.weight"}));
        } else {
          EXPECT_EQ(rule.kind, TRIAX_HF_RENAME) << name;
          EXPECT_EQ(rule.hf_names, std::vector<std::string>{name});
        }
      }
      EXPECT_EQ(mapped, plugin) << "tied " << tied << " bias " << bias;
    }
  }
}

TEST_F(HfLlamaTest, ModelConfigRoundTripsThroughConfigJson) {
  for (const std::string& yaml :
       {std::string("{}"), tiny_yaml(false) + "rope_scaling: {rope_type: linear, factor: 2.5}\n",
        tiny_yaml(true, true) + "bos_token_id: 7\neos_token_id: 8\npad_token_id: 0\ninitializer_range: 0.041\n"
                                "use_cache: false\npretraining_tp: 2\n"
                                "rope_scaling: {rope_type: llama3, factor: 8.0, low_freq_factor: 1.0, "
                                "high_freq_factor: 4.0, original_max_position_embeddings: 16}\n"})
    EXPECT_EQ(resolved(round_trip(yaml)), resolved(yaml)) << yaml;
  const Json config = Json::parse(mapping_->config_to_hf(tiny_yaml(false), "bfloat16").first);
  EXPECT_EQ(config["architectures"], Json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(config["torch_dtype"], "bfloat16");
  EXPECT_EQ(config["head_dim"], 4);
  EXPECT_EQ(config["rope_theta"], 500000.0);
  EXPECT_TRUE(config["pad_token_id"].is_null());
  EXPECT_EQ(Json::parse(mapping_->config_to_hf(tiny_yaml(false), "float32").second),
            Json({{"bos_token_id", 1}, {"eos_token_id", 2}}));
}

TEST_F(HfLlamaTest, ModelConfigRefusalsNameTheKey) {
  auto refused = [](const std::string& extra) {
    return error_of<triax::Error>([&] { mapping_->config_to_hf(tiny_yaml(false) + extra, "float32"); });
  };
  EXPECT_NE(refused("rope_interleaved: true\n").find("model.model_config.rope_interleaved"), std::string::npos);
  EXPECT_NE(refused("mystery: 1\n").find("model.model_config.mystery: unknown key"), std::string::npos);
  EXPECT_NE(refused("hidden_act: gelu\n").find("model.model_config.hidden_act"), std::string::npos);
  EXPECT_NE(refused("rope_scaling: {rope_type: yarn, factor: 2}\n").find("model.model_config.rope_scaling.rope_type"),
            std::string::npos);
}

TEST_F(HfLlamaTest, ConfigJsonRefusalsNameTheFileAndTheKey) {
  const std::vector<std::pair<std::function<void(Json&)>, std::string>> cases = {
      {[](Json& c) { c["architectures"] = {"MistralForCausalLM"}; }, "architectures: expected one of"},
      {[](Json& c) { c["model_type"] = "mistral"; }, "model_type: 'mistral' is not supported"},
      {[](Json& c) { c["hidden_act"] = "gelu"; }, "hidden_act"},
      {[](Json& c) { c["mlp_bias"] = true; }, "mlp_bias: 'true' is not supported"},
      {[](Json& c) { c["head_dim"] = 8; }, "head_dim: 8 is not supported"},
      {[](Json& c) { c["attention_dropout"] = 0.1; }, "attention_dropout: '0.1' is not supported"},
      {[](Json& c) {
         c["eos_token_id"] = {2, 3};
       },
       "eos_token_id: expected one token id"},
      {[](Json& c) {
         c["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 500000.0}};
       },
       "rope_parameters.rope_type: 'yarn' RoPE is not supported"},
      {[](Json& c) { c["num_attention_heads"] = 3; }, "num_attention_heads"}};
  for (const auto& [edit, words] : cases) {
    const std::string message = config_json_refusal(edit);
    EXPECT_EQ(message.rfind("/x/config.json: ", 0), 0u) << message;
    EXPECT_NE(message.find(words), std::string::npos) << words << " in " << message;
  }
  // transformers 4.x writes a list of one eos id, and accepts attention_dropout 0 as an integer.
  EXPECT_EQ(config_json_refusal([](Json& c) {
              c["eos_token_id"] = {5};
              c["attention_dropout"] = 0;
            }),
            "(no error)");
}

TEST_F(HfLlamaTest, WriteThenReadIsExact) {
  at::manual_seed(3);
  for (bool tied : {false, true}) {
    for (int64_t shard_bytes : {int64_t{1} << 30, int64_t{3000}}) {
      const std::string yaml = tiny_yaml(tied, /*bias=*/true);
      const auto weights = random_weights(yaml);
      const fs::path folder = root_ / ("out_" + std::to_string(tied) + "_" + std::to_string(shard_bytes));
      write(yaml, weights, folder, at::kBFloat16, shard_bytes);

      const bool sharded = shard_bytes < (int64_t{1} << 30);
      EXPECT_EQ(fs::exists(folder / "model.safetensors"), !sharded);
      EXPECT_EQ(fs::exists(folder / "model.safetensors.index.json"), sharded);
      if (sharded) {
        size_t shards = 0;
        for (const auto& entry : fs::directory_iterator(folder)) {
          if (entry.path().extension() != ".safetensors") continue;
          ++shards;
          triax::interop::SafetensorsFile shard(entry.path().string());
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

      if (!sharded) {  // Hugging Face's separate q/k/v and gate/up tensors, cut from the fused ones
        triax::interop::SafetensorsFile file((folder / "model.safetensors").string());
        const std::string layer = "model.layers.1.";
        const auto [q, k, v] = triax::QkvLayout{4, 2, 4}.split(weights.at(layer + "self_attn.qkv_proj.bias"));
        EXPECT_TRUE(at::equal(file.read(layer + "self_attn.q_proj.bias"), q.to(at::kBFloat16)));
        EXPECT_TRUE(at::equal(file.read(layer + "self_attn.k_proj.bias"), k.to(at::kBFloat16)));
        EXPECT_TRUE(at::equal(file.read(layer + "self_attn.v_proj.bias"), v.to(at::kBFloat16)));
        const auto [wq, wk, wv] = triax::QkvLayout{4, 2, 4}.split(weights.at(layer + "self_attn.qkv_proj.weight"));
        EXPECT_TRUE(at::equal(file.read(layer + "self_attn.q_proj.weight"), wq.to(at::kBFloat16)));
        EXPECT_TRUE(at::equal(file.read(layer + "self_attn.v_proj.weight"), wv.to(at::kBFloat16)));
        const at::Tensor gate_up = weights.at(layer + "mlp.gate_up_proj.weight");
        EXPECT_TRUE(at::equal(file.read(layer + "mlp.gate_proj.weight"), gate_up[0].to(at::kBFloat16)));
        EXPECT_TRUE(at::equal(file.read(layer + "mlp.up_proj.weight"), gate_up[1].to(at::kBFloat16)));
        const auto& names = file.names();
        EXPECT_EQ(std::find(names.begin(), names.end(), layer + "self_attn.qkv_proj.weight"), names.end());
      }

      const triax::checkpoint::HfModel model = triax::checkpoint::read_hf_model(*registry_, folder.string());
      EXPECT_EQ(model.plugin, "llama");
      EXPECT_EQ(model.dtype, at::kBFloat16);
      EXPECT_EQ(model.parameters.size(), weights.size());
      for (const auto& [name, tensor] : weights) {
        ASSERT_TRUE(model.parameters.count(name)) << name;
        EXPECT_TRUE(at::equal(model.parameters.at(name), tensor.to(at::kBFloat16))) << name;
      }
      EXPECT_EQ(model.parameters.count("lm_head.weight"), tied ? 0u : 1u);
      EXPECT_EQ(resolved(model.model_config_yaml), resolved(yaml));
    }
  }
  // Nothing but the exports in the parent: the temporary folders were renamed away.
  for (const auto& entry : fs::directory_iterator(root_))
    EXPECT_EQ(entry.path().filename().string().rfind("out_", 0), 0u) << entry.path();
}

TEST_F(HfLlamaTest, FailedExportsLeaveNothingBehind) {
  const std::string yaml = tiny_yaml(false);
  const fs::path target = root_ / "export";
  auto refused = [&](std::map<std::string, at::Tensor> weights, at::ScalarType dtype = at::kFloat,
                     int64_t shard_bytes = 1 << 30) {
    return error_of<triax::Error>([&] { write(yaml, weights, target, dtype, shard_bytes); });
  };
  const std::string q = "model.layers.1.self_attn.qkv_proj.weight";
  auto weights = random_weights(yaml);
  weights.erase(q);
  EXPECT_NE(refused(weights).find("tensor '" + q + "' is missing"), std::string::npos);
  weights = random_weights(yaml);
  weights[q] = at::zeros({2, 16, 15});
  EXPECT_NE(refused(weights).find("'" + q +
                                  "' has shape [2, 16, 15], but model plugin 'llama''s tensor map implies [2, 16, 16]"),
            std::string::npos);
  weights = random_weights(yaml);
  weights["model.layers.2.mlp.gate_up_proj.weight"] = at::zeros({2, 24, 16});
  EXPECT_NE(refused(weights).find("unexpected tensor 'model.layers.2.mlp.gate_up_proj.weight'"), std::string::npos);
  weights = random_weights(yaml);
  weights[q] = at::zeros({2, 16, 16}, at::kInt);
  EXPECT_NE(refused(weights).find("'" + q + "' has dtype Int"), std::string::npos);
  EXPECT_NE(refused(random_weights(yaml), at::kDouble).find("cannot export weights as Double"), std::string::npos);
  EXPECT_NE(refused(random_weights(yaml), at::kFloat, 0).find("shard size limit must be positive"), std::string::npos);
  EXPECT_TRUE(fs::is_empty(root_)) << "a refused export left something behind";

  // An existing folder with content is never replaced; an empty one is.
  fs::create_directories(target);
  std::ofstream(target / "keep.txt") << "mine";
  EXPECT_NE(refused(random_weights(yaml)).find("already exists"), std::string::npos);
  EXPECT_TRUE(fs::exists(target / "keep.txt"));
  fs::remove(target / "keep.txt");
  write(yaml, random_weights(yaml), target);
  EXPECT_TRUE(fs::exists(target / "config.json"));
}

TEST_F(HfLlamaTest, FoldersWithoutUsableWeightsAreRefused) {
  auto read_error = [&](const fs::path& folder) {
    return error_of<triax::Error>([&] { triax::checkpoint::read_hf_model(*registry_, folder.string()); });
  };
  EXPECT_NE(read_error(root_ / "absent").find("not a folder"), std::string::npos);
  const fs::path folder = root_ / "model";
  write(tiny_yaml(false), random_weights(tiny_yaml(false)), folder);
  std::ofstream(folder / "model.safetensors.index.json") << "{\"weight_map\": {}}";
  EXPECT_NE(read_error(folder).find("holds both model.safetensors and"), std::string::npos);
  fs::remove(folder / "model.safetensors.index.json");
  fs::remove(folder / "model.safetensors");
  EXPECT_NE(read_error(folder).find("no weights"), std::string::npos);
  fs::remove(folder / "config.json");
  EXPECT_NE(read_error(folder).find("config.json: cannot open"), std::string::npos);
}

}  // namespace
