// The mamba2 plugin on one rank: its initialisation, its logits against an independent
// double-precision reference of Hugging Face's computation (tied and untied, with biases, chunk
// sizes that do not divide the length, a time-step limit), and training with recomputation
// against without.
#include <gtest/gtest.h>

#include <cmath>

#include "cache_test_support.hpp"
#include "causal_lm_checks.hpp"
#include "mamba2_test_support.hpp"

namespace {

using namespace mamba2_test;

TEST(Mamba2Model, InitialisesAsHuggingFace) {
  auto model = build(tiny_yaml(false, "time_step_min: 0.01\ntime_step_max: 0.05\n"));
  const auto& c = model->config();
  std::map<std::string, at::Tensor> p = parameters_of(*model);
  const std::string m = "backbone.layers.1.mixer.";
  EXPECT_LT(max_abs_diff(p.at(m + "A_log"), at::log(at::arange(1, c.num_heads + 1, at::kDouble))), 1e-6);
  EXPECT_EQ(p.at(m + "D").min().item<double>(), 1.0);
  EXPECT_EQ(p.at(m + "norm.weight").min().item<double>(), 1.0);
  EXPECT_EQ(p.at(m + "conv1d.bias").abs().max().item<double>(), 0.0);
  const at::Tensor dt = at::softplus(p.at(m + "dt_bias"));
  EXPECT_GE(dt.min().item<double>(), 0.01 * (1 - 1e-5));
  EXPECT_LE(dt.max().item<double>(), 0.05 * (1 + 1e-5));
  const double bound = 1.0 / std::sqrt(static_cast<double>(c.d_inner()));  // PyTorch's default
  EXPECT_LE(p.at(m + "out_proj.weight").abs().max().item<double>(), bound);
  EXPECT_GT(p.at(m + "out_proj.weight").abs().max().item<double>(), 0.8 * bound);
  EXPECT_NEAR(p.at(m + "in_proj.weight").std().item<double>(), 0.5, 0.05);
  EXPECT_NEAR(p.at("backbone.embeddings.weight").std().item<double>(), 0.5, 0.05);
  EXPECT_FALSE(at::equal(p.at("backbone.layers.0.mixer.dt_bias"), p.at(m + "dt_bias")));  // seeded per name
  for (const auto& parameter : model->parameter_table()) {
    const bool exempt = parameter.name.find("A_log") != std::string::npos ||
                        parameter.name.find(".D") != std::string::npos ||
                        parameter.name.find("dt_bias") != std::string::npos;
    EXPECT_EQ((parameter.spec.flags & TRIAX_PARAM_NO_WEIGHT_DECAY) != 0, exempt) << parameter.name;
  }
}

TEST(Mamba2Model, LogitsMatchTheReference) {
  for (const std::string& yaml :
       std::vector<std::string>{tiny_yaml(true), tiny_yaml(false), tiny_yaml(false, "residual_in_fp32: false\n"),
                                tiny_yaml(false, "time_step_limit: [0.05, 0.5]\n"),
                                "hidden_size: 12\nnum_hidden_layers: 2\nvocab_size: 30\nnum_heads: 6\nhead_dim: 6\n"
                                "expand: 3\nstate_size: 3\nn_groups: 3\nconv_kernel: 4\nchunk_size: 3\n"
                                "use_bias: true\nuse_conv_bias: false\n"}) {
    auto model = build(yaml);
    triax::test::randomize_parameters(*model, {"proj.bias"}, 3);
    const at::Tensor ids = random_tokens(2, 11, 5);
    triax::test::expect_logits_match(cache_test::full_logits(*model, ids), reference_logits(*model, ids), yaml);
  }
}

// The chunk size changes how the scan is computed, not what.
TEST(Mamba2Model, ChunkSizeChangesNothing) {
  const at::Tensor ids = random_tokens(2, 13, 6);
  std::vector<at::Tensor> logits;
  for (const char* chunk : {"1", "4", "5", "64"}) {
    std::string yaml = tiny_yaml(true);
    yaml.replace(yaml.find("chunk_size: 4"), 13, std::string("chunk_size: ") + chunk);
    logits.push_back(cache_test::full_logits(*build(yaml), ids));
  }
  for (size_t i = 1; i < logits.size(); ++i) EXPECT_LT(max_abs_diff(logits[i], logits[0]), 1e-5) << i;
}

// Loss and every gradient with per-layer recomputation equal those without.
TEST(Mamba2Model, RecomputationChangesNothing) {
  triax::test::expect_recomputation_changes_nothing(
      [](bool recompute) {
        ModelContext context = tiny_model_context();
        context.recompute_layer = recompute;
        return build(tiny_yaml(false), context);
      },
      random_tokens(2, 9, 8), random_tokens(2, 9, 9));
}

}  // namespace
