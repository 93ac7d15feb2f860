// The Mamba plugin on one rank: its config (strict, nanotron's keys, dt_rank auto), its
// initialisation, its logits against an independent double-precision reference of Hugging Face's
// computation (tied and untied, with biases), training with recomputation against without, and
// the refusals of bad input: channels or vocabulary not divisible by tp, an unknown ssm_cfg key, a
// Mamba-2 config.json, a mismatched intermediate_size.
#include <gtest/gtest.h>

#include <cmath>

#include "cache_test_support.hpp"
#include "causal_lm_checks.hpp"
#include "error_of.hpp"
#include "mamba_test_support.hpp"
#include "triax/error.hpp"

namespace {

using namespace mamba_test;
using triax::test::error_of;
using triax::mamba::MambaConfig;

MambaConfig read(const std::string& yaml) {
  ConfigReader reader = ConfigReader::from_text(yaml, "model.model_config");
  return MambaConfig::read(reader);
}

TEST(MambaConfig, ReadsNanotronKeysWithDefaults) {
  ConfigReader reader = ConfigReader::from_text("d_model: 40\nvocab_size: 50277\nis_mamba_config: true\n"
                                                "ssm_cfg: {dt_rank: auto, use_fast_path: true}\nfused_add_norm: true\n",
                                                "model.model_config");
  const MambaConfig c = MambaConfig::read(reader);
  EXPECT_EQ(c.dt_rank(), 3);  // ceil(40 / 16)
  EXPECT_EQ(c.d_inner(), 80);
  EXPECT_EQ(c.model_vocab_size(), 50280);  // padded to a multiple of 8
  EXPECT_EQ(reader.resolved()["ssm_cfg"]["d_state"].as<int>(), 16);
  EXPECT_EQ(reader.resolved()["ssm_cfg"]["dt_rank"].as<std::string>(), "auto");
  EXPECT_EQ(read("ssm_cfg: {dt_rank: 7}").dt_rank(), 7);
  // Without ssm_cfg every default is recorded.
  ConfigReader bare = ConfigReader::from_text("d_model: 16\n", "model.model_config");
  MambaConfig::read(bare);
  EXPECT_EQ(bare.resolved()["ssm_cfg"]["dt_init"].as<std::string>(), "random");
}

TEST(MambaConfig, RefusesBadKeysWithTheirPath) {
  const std::string unknown = error_of([] { read("ssm_cfg: {d_state: 8, d_stat: 4}"); });
  EXPECT_NE(unknown.find("model.model_config.ssm_cfg.d_stat"), std::string::npos) << unknown;
  const std::string rank = error_of([] { read("ssm_cfg: {dt_rank: big}"); });
  EXPECT_NE(rank.find("model.model_config.ssm_cfg.dt_rank"), std::string::npos) << rank;
  EXPECT_NE(rank.find("\"auto\" or a positive integer"), std::string::npos) << rank;
  const std::string norm = error_of([] { read("rms_norm: false"); });
  EXPECT_NE(norm.find("model.model_config.rms_norm"), std::string::npos) << norm;
  const std::string marker = error_of([] { read("is_mamba_config: false"); });
  EXPECT_NE(marker.find("is_mamba_config"), std::string::npos) << marker;
  const std::string top = error_of([] { read("d_modle: 16"); });
  EXPECT_NE(top.find("model.model_config.d_modle"), std::string::npos) << top;
}

TEST(MambaModel, RefusesASplitThatDoesNotDivideByTp) {
  ModelContext context = tiny_model_context();
  context.tp_size = 2;
  const std::string channels =
      error_of([&] { build("d_model: 15\nnum_hidden_layers: 2\nssm_cfg: {expand: 1}\nvocab_size: 32\n", context); });
  EXPECT_NE(channels.find("model.model_config.ssm_cfg.expand"), std::string::npos) << channels;
  EXPECT_NE(channels.find("15 channels are not divisible by the tensor parallel size 2"), std::string::npos)
      << channels;
  const std::string vocab = error_of(
      [&] { build("d_model: 16\nnum_hidden_layers: 2\nvocab_size: 31\npad_vocab_size_multiple: 1\n", context); });
  EXPECT_NE(vocab.find("model.model_config.vocab_size"), std::string::npos) << vocab;
  EXPECT_NE(vocab.find("31 rows"), std::string::npos) << vocab;
}

TEST(MambaModel, InitialisesAsNanotron) {
  auto model = build(tiny_yaml(false));
  const auto& c = model->config();
  std::map<std::string, at::Tensor> p = parameters_of(*model);
  const std::string m = "backbone.layers.1.mixer.";
  const at::Tensor expected_a = at::log(at::arange(1, c.ssm.d_state + 1, at::kDouble)).expand({c.d_inner(), -1});
  EXPECT_LT(max_abs_diff(p.at(m + "A_log"), expected_a), 1e-6);
  EXPECT_EQ(p.at(m + "D").min().item<double>(), 1.0);
  const at::Tensor dt = at::softplus(p.at(m + "dt_proj.bias"));
  EXPECT_GE(dt.min().item<double>(), c.ssm.dt_min * (1 - 1e-5));
  EXPECT_LE(dt.max().item<double>(), c.ssm.dt_max * (1 + 1e-5));
  EXPECT_GT(dt.max().item<double>() / dt.min().item<double>(), 3.0);  // log-uniform over [dt_min, dt_max]
  EXPECT_LE(p.at(m + "dt_proj.weight").abs().max().item<double>(), 1.0);  // dt_rank^-0.5 = 1
  // rescale_prenorm_residual: U(+-1/sqrt(d_inner)) / sqrt(num_hidden_layers).
  const double bound = 1.0 / std::sqrt(static_cast<double>(c.d_inner())) / std::sqrt(2.0);
  EXPECT_LE(p.at(m + "out_proj.weight").abs().max().item<double>(), bound);
  EXPECT_GT(p.at(m + "out_proj.weight").abs().max().item<double>(), 0.8 * bound);
  EXPECT_NEAR(p.at("backbone.embeddings.weight").std().item<double>(), 0.5, 0.05);
  // Weight decay: nanotron exempts A_log, D and dt_proj.bias.
  for (const auto& parameter : model->parameter_table()) {
    const bool exempt = parameter.name.find("A_log") != std::string::npos || parameter.name.find(".D") != std::string::npos ||
                        parameter.name.find("dt_proj.bias") != std::string::npos;
    EXPECT_EQ((parameter.spec.flags & TRIAX_PARAM_NO_WEIGHT_DECAY) != 0, exempt) << parameter.name;
  }
}

TEST(MambaModel, LogitsMatchTheReference) {
  for (const std::string& yaml : std::vector<std::string>{tiny_yaml(true), tiny_yaml(false), tiny_yaml(false, "residual_in_fp32: false\n"),
                                  "d_model: 16\nnum_hidden_layers: 2\nvocab_size: 32\n"
                                  "ssm_cfg: {d_state: 3, d_conv: 4, expand: 3, dt_rank: 2, bias: true}\n"}) {
    auto model = build(yaml);
    triax::test::randomize_parameters(*model, {"in_proj.bias", "out_proj.bias"}, 3);
    const at::Tensor ids = random_tokens(2, 11, 5);
    triax::test::expect_logits_match(cache_test::full_logits(*model, ids), reference_logits(*model, ids), yaml);
  }
}

// Loss and every gradient with per-layer recomputation equal those without.
TEST(MambaModel, RecomputationChangesNothing) {
  triax::test::expect_recomputation_changes_nothing(
      [](bool recompute) {
        ModelContext context = tiny_model_context();
        context.recompute_layer = recompute;
        return build(tiny_yaml(false), context);
      },
      random_tokens(2, 9, 8), random_tokens(2, 9, 9));
}

// The tensor map names every parameter with its whole shape; config.json round-trips.
TEST(MambaHfMapping, TensorMapCoversTheParameterTableAndConfigRoundTrips) {
  for (const std::string& yaml : std::vector<std::string>{tiny_yaml(true),
                                  "d_model: 16\nnum_hidden_layers: 2\nvocab_size: 30\ntie_word_embeddings: false\n"
                                  "ssm_cfg: {d_state: 4, d_conv: 3, bias: true, conv_bias: false}\n"}) {
    auto model = build(yaml);
    const triax::HfMapping mapping = MambaModel::hf_mapping();
    triax::test::expect_tensor_map_covers_parameters(mapping, yaml, *model);

    ConfigReader to = ConfigReader::from_text(yaml, "model.model_config");
    const std::string json = mapping.config_to_hf(to, "float32");
    ConfigReader back_reader = ConfigReader::from_text(json, "", "config.json");
    ConfigReader again(mapping.config_from_hf(back_reader), "model.model_config");
    const MambaConfig a = read(yaml), b = MambaConfig::read(again);
    EXPECT_EQ(a.model_vocab_size(), b.model_vocab_size());
    EXPECT_EQ(a.d_inner(), b.d_inner());
    EXPECT_EQ(a.dt_rank(), b.dt_rank());
    EXPECT_EQ(a.ssm.d_conv, b.ssm.d_conv);
    EXPECT_EQ(a.ssm.bias, b.ssm.bias);
    EXPECT_EQ(a.ssm.conv_bias, b.ssm.conv_bias);
    EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
    EXPECT_EQ(a.residual_in_fp32, b.residual_in_fp32);
    EXPECT_DOUBLE_EQ(a.ssm.dt_min, b.ssm.dt_min);
    EXPECT_DOUBLE_EQ(a.rms_norm_eps, b.rms_norm_eps);
  }
}

// ---- Hugging Face config.json refusals (the mapping's own reader) -----------------------------

std::string from_hf(const std::string& json) {
  ConfigReader reader = ConfigReader::from_text(json, "", "config.json");
  return triax::to_yaml_text(MambaModel::hf_mapping().config_from_hf(reader));
}

const char* kHfConfig =
    R"({"architectures": ["MambaForCausalLM"], "model_type": "mamba", "hidden_size": 16, "num_hidden_layers": 2,
        "vocab_size": 32, "state_size": 4, "conv_kernel": 3, "expand": 2, "time_step_rank": 1, %EXTRA%})";

std::string hf_config(const std::string& extra) {
  std::string text = kHfConfig;
  return text.replace(text.find("%EXTRA%"), 7, extra);
}

TEST(MambaHfMapping, ReadsConfigJsonAndRefusesWhatItCannotRepresent) {
  const YAML::Node read_back = YAML::Load(from_hf(hf_config(R"("intermediate_size": 32, "use_conv_bias": true)")));
  EXPECT_EQ(read_back["d_model"].as<int>(), 16);
  EXPECT_EQ(read_back["ssm_cfg"]["d_conv"].as<int>(), 3);
  EXPECT_EQ(read_back["ssm_cfg"]["dt_rank"].as<int>(), 1);
  EXPECT_EQ(read_back["pad_vocab_size_multiple"].as<int>(), 1);

  const std::string inner = error_of([] { from_hf(hf_config(R"("intermediate_size": 48)")); });
  EXPECT_NE(inner.find("config.json"), std::string::npos) << inner;
  EXPECT_NE(inner.find("intermediate_size"), std::string::npos) << inner;
  EXPECT_NE(inner.find("expand x hidden_size = 2 x 16 = 32"), std::string::npos) << inner;

  std::string mamba2 = hf_config(R"("n_groups": 1)");
  mamba2.replace(mamba2.find("MambaForCausalLM"), 16, "Mamba2ForCausalLM");
  const std::string second = error_of([&] { from_hf(mamba2); });
  EXPECT_NE(second.find("config.json"), std::string::npos) << second;
  EXPECT_NE(second.find("Mamba2ForCausalLM (Mamba-2) is not supported"), std::string::npos) << second;

  const std::string act = error_of([] { from_hf(hf_config(R"("hidden_act": "gelu")")); });
  EXPECT_NE(act.find("hidden_act"), std::string::npos) << act;
}

}  // namespace
