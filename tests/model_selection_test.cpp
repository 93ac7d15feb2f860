// Choosing the model plugin without model.plugin: by the nanotron marker key in model_config (one
// match, none, two), by a Hugging Face folder's architecture (and none reading it), the
// model_config a folder's config.json brings (with the keys given beside it laid over it), and the
// refusal of a plugin without a Hugging Face mapping asked to convert. Plugins: the build's
// (llama, qwen2, moe, mamba) and tests/plugins/model_markers.
#include "triax/core/plugins/model_selection.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "error_of.hpp"
#include "triax/convert/hf_conversion.hpp"
#include "triax/convert/hf_model_format.hpp"
#include "triax/convert/hf_weights.hpp"
#include "triax/convert/model_hf_mapping.hpp"
#include "triax/error.hpp"
#include "triax/interop/safetensors.hpp"

namespace fs = std::filesystem;

namespace {

using triax::test::error_of;

const triax::HfModelFormat kHfFolders;  // what `triax train` reads model.init_method.path with

const char* kTinyLlama =
    "{is_llama_config: true, hidden_size: 16, num_attention_heads: 4, num_key_value_heads: 2, "
    "intermediate_size: 24, num_hidden_layers: 1, vocab_size: 32, max_position_embeddings: 32}";

class ModelSelectionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    registry_ = new triax::PluginRegistry();
    registry_->scan_folder(TRIAX_TEST_PLUGIN_DIR);
    registry_->scan_folder(std::string(TRIAX_TEST_PLUGINS_DIR) + "/model_markers");
  }
  static void TearDownTestSuite() { delete registry_; }
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("triax_model_selection_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  static std::string by_marker(const std::string& model_config) {
    return triax::model_plugin_by_marker(*registry_, YAML::Load(model_config), "run.yaml");
  }
  // A Hugging Face folder of the tiny Llama above, written through the llama plugin's mapping.
  std::string llama_folder() {
    std::map<std::string, at::Tensor> weights;
    for (const triax::HfTensorRule& rule : triax::ModelHfMapping(*registry_, "llama").tensor_map(kTinyLlama))
      if (rule.kind != TRIAX_HF_IGNORE && !rule.optional) weights[rule.triax_name] = at::randn(rule.shape);
    const std::string folder = (root_ / "hf").string();
    triax::checkpoint::write_hf_model(*registry_, "llama", kTinyLlama, weights, at::kFloat, 1 << 30, folder);
    return folder;
  }

  // A run config starting from `folder` with `model_config` (YAML) beside it.
  static triax::TrainConfig config_from_folder(const std::string& folder, const std::string& model_config) {
    return triax::parse_train_config(
        YAML::Load("model: {init_method: {path: " + folder + "}, model_config: " + model_config +
                   "}\ntokens: {sequence_length: 16, train_steps: 1, micro_batch_size: 1, "
                   "batch_accumulation_per_replica: 1}\n"
                   "optimizer: {learning_rate_scheduler: {learning_rate: 0.001}}\n"),
        "run.yaml");
  }

  static triax::PluginRegistry* registry_;
  fs::path root_;
};
triax::PluginRegistry* ModelSelectionTest::registry_ = nullptr;

TEST_F(ModelSelectionTest, TheMarkerKeyChoosesThePlugin) {
  EXPECT_EQ(by_marker("{is_a_config: true, hidden_size: 3}"), "marker_a");
  EXPECT_EQ(by_marker("{is_b_config: true, b_extra_config: {experts: 4}}"), "marker_b");
  EXPECT_EQ(by_marker(kTinyLlama), "llama");
  EXPECT_EQ(by_marker("{is_mamba_config: true, d_model: 16}"), "mamba");  // nanotron's Mamba example
}

TEST_F(ModelSelectionTest, NoMatchingMarkerListsThePluginsAndTheirMarkers) {
  for (const char* config : {"{hidden_size: 3}", "{is_b_config: true}", "{is_a_config: false}"}) {
    const std::string message = error_of<triax::Error>([&] { by_marker(config); });
    EXPECT_NE(message.find("run.yaml: model.plugin: not given, and model.model_config holds no model plugin's marker"),
              std::string::npos)
        << message;
    for (const char* listed : {"marker_a (is_a_config)", "marker_b (is_b_config with b_extra_config)",
                               "llama (is_llama_config)", "abi_1_2_model (no marker)"})
      EXPECT_NE(message.find(listed), std::string::npos) << listed << " in " << message;
  }
}

// nanotron's Qwen2Config marks both the dense model and the mixture of experts: moe_config decides.
TEST_F(ModelSelectionTest, AMarkerWithItsRequiredKeyWinsOverTheMarkerAlone) {
  EXPECT_EQ(by_marker("{is_qwen2_config: true}"), "qwen2");
  EXPECT_EQ(by_marker("{is_qwen2_config: true, moe_config: null}"), "qwen2");  // nanotron's config_qwen.yaml
  EXPECT_EQ(by_marker("{is_qwen2_config: true, moe_config: {num_experts: 4}}"), "moe");
}

TEST_F(ModelSelectionTest, TwoMatchingMarkersAreRefused) {
  const std::string message = error_of<triax::Error>([] { by_marker("{is_a_config: true, is_llama_config: true}"); });
  EXPECT_NE(message.find("holds the markers of several model plugins ("), std::string::npos) << message;
  EXPECT_NE(message.find("marker_a"), std::string::npos) << message;
  EXPECT_NE(message.find("llama"), std::string::npos) << message;
}

TEST_F(ModelSelectionTest, APluginWithoutAMappingIsRefusedForConversion) {
  std::string message = error_of<triax::Error>([] { triax::ModelHfMapping(*registry_, "marker_a"); });
  EXPECT_NE(message.find("model plugin 'marker_a'"), std::string::npos) << message;
  EXPECT_NE(message.find("has no Hugging Face mapping"), std::string::npos) << message;
  message = error_of<triax::Error>([&] {
    triax::checkpoint::write_hf_model(*registry_, "abi_1_2_model", "{}", {}, at::kFloat, 1 << 30,
                                      (root_ / "out").string());
  });
  EXPECT_NE(message.find("model plugin 'abi_1_2_model'"), std::string::npos) << message;
  EXPECT_NE(message.find("has no Hugging Face mapping"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(root_ / "out"));
}

TEST_F(ModelSelectionTest, AnArchitectureNoPluginReadsIsRefused) {
  const std::string folder = llama_folder();
  EXPECT_EQ(triax::checkpoint::read_hf_model(*registry_, folder).plugin, "llama");
  std::ofstream(fs::path(folder) / "config.json") << R"({"architectures": ["NoSuchModelForCausalLM"]})";
  for (const std::string& message :
       {error_of<triax::Error>([&] { triax::checkpoint::read_hf_model(*registry_, folder); }),
        error_of<triax::Error>(
            [&] { triax::checkpoint::import_from_hf(*registry_, folder, (root_ / "ckpt").string()); })}) {
    EXPECT_NE(message.find(folder + "/config.json: architectures [NoSuchModelForCausalLM]: no model plugin reads"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("llama (LlamaForCausalLM)"), std::string::npos) << message;
    EXPECT_NE(message.find("mamba (MambaForCausalLM)"), std::string::npos) << message;
    EXPECT_NE(message.find("marker_a (no Hugging Face mapping)"), std::string::npos) << message;
  }
}

TEST_F(ModelSelectionTest, AHuggingFaceFolderBringsPluginAndModelConfig) {
  const std::string folder = llama_folder();
  triax::TrainConfig config = triax::parse_train_config(
      YAML::Load("model: {init_method: {path: " + folder +
                 "}}\ntokens: {sequence_length: 16, train_steps: 1, micro_batch_size: 1, "
                 "batch_accumulation_per_replica: 1}\noptimizer: {learning_rate_scheduler: {learning_rate: 0.001}}\n"),
      "run.yaml");
  EXPECT_TRUE(config.model.plugin.empty());
  triax::resolve_model_section(config, *registry_, &kHfFolders);
  EXPECT_EQ(config.model.plugin, "llama");
  EXPECT_EQ(config.model.model_config["hidden_size"].as<int>(), 16);
  EXPECT_EQ(config.model.model_config["num_key_value_heads"].as<int>(), 2);
  EXPECT_EQ(config.resolved["model"]["plugin"].as<std::string>(), "llama");
  EXPECT_EQ(config.resolved["model"]["model_config"]["vocab_size"].as<int>(), 32);

  // Without such a folder, model_config stays required.
  triax::TrainConfig missing = triax::parse_train_config(
      YAML::Load("model: {init_method: {path: " + (root_ / "nothing").string() +
                 "}}\ntokens: {sequence_length: 16, train_steps: 1, micro_batch_size: 1, "
                 "batch_accumulation_per_replica: 1}\noptimizer: {learning_rate_scheduler: {learning_rate: 0.001}}\n"),
      "run.yaml");
  const std::string message =
      error_of<triax::Error>([&] { triax::resolve_model_section(missing, *registry_, &kHfFolders); });
  EXPECT_NE(message.find("run.yaml: model.model_config: required key is missing"), std::string::npos) << message;
}

// Keys given beside the folder change what they name; the folder's config.json gives the rest.
TEST_F(ModelSelectionTest, KeysGivenBesideAFolderAreLaidOverItsConfig) {
  triax::TrainConfig config = config_from_folder(llama_folder(), "{z_loss_enabled: true, rope_theta: 500000.0}");
  triax::resolve_model_section(config, *registry_, &kHfFolders);
  EXPECT_EQ(config.model.plugin, "llama");
  EXPECT_EQ(config.model.model_config["hidden_size"].as<int>(), 16);
  EXPECT_EQ(config.model.model_config["vocab_size"].as<int>(), 32);
  EXPECT_TRUE(config.model.model_config["z_loss_enabled"].as<bool>());
  EXPECT_EQ(config.model.model_config["rope_theta"].as<double>(), 500000.0);
  EXPECT_TRUE(config.resolved["model"]["model_config"]["z_loss_enabled"].as<bool>());
}

TEST_F(ModelSelectionTest, AKeyChangingAWeightBesideAFolderIsRefusedNamingBoth) {
  const std::string folder = llama_folder();
  triax::TrainConfig wider = config_from_folder(folder, "{z_loss_enabled: true, hidden_size: 32}");
  std::string message =
      error_of<triax::ConfigError>([&] { triax::resolve_model_section(wider, *registry_, &kHfFolders); });
  for (const std::string& part : {std::string("run.yaml: model.model_config.hidden_size"),
                                  "contradicts the weights of the Hugging Face folder " + folder,
                                  std::string("model.embed_tokens.weight is [32, 16] there and [32, 32] with the keys "
                                              "given")})
    EXPECT_NE(message.find(part), std::string::npos) << part << " in " << message;
  EXPECT_EQ(message.find("z_loss_enabled"), std::string::npos) << message;

  triax::TrainConfig deeper = config_from_folder(folder, "{num_hidden_layers: 2}");
  message = error_of<triax::ConfigError>([&] { triax::resolve_model_section(deeper, *registry_, &kHfFolders); });
  EXPECT_NE(message.find("model.model_config.num_hidden_layers: contradicts"), std::string::npos) << message;
  EXPECT_NE(message.find("model.layers.1.input_layernorm.weight is none there and [16]"), std::string::npos) << message;
}

}  // namespace
