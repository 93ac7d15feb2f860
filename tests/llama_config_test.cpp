// The Llama plugin's model_config: errors naming the key (also for a bad tensor-parallel split),
// a nanotron config loading and resolving, and the whole plugin through its C ABI.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "llama_test_support.hpp"
#include "triax/error.hpp"
#include "triax/plugin.hpp"
#include "triax/tensor_handle.hpp"

namespace {

using namespace llama_test;

std::string config_error(const std::string& yaml, const std::string& init = "{std: 0.02}") {
  try {
    build(yaml, make_context(2, at::kFloat, init));
  } catch (const triax::ConfigError& e) {
    return e.what();
  }
  return "(no ConfigError)";
}

TEST(LlamaConfig, ErrorsNameTheKey) {
  EXPECT_NE(config_error(tiny_yaml(false, "no_such_key: 1\n")).find("model.model_config.no_such_key"),
            std::string::npos);
  std::string bad_heads = "hidden_size: 16\nnum_attention_heads: 4\nnum_key_value_heads: 3\n";
  EXPECT_NE(config_error(bad_heads).find("model.model_config.num_key_value_heads"), std::string::npos)
      << config_error(bad_heads);
  EXPECT_NE(config_error(tiny_yaml(false, "hidden_act: gelu\n")).find("model.model_config.hidden_act"),
            std::string::npos);
  EXPECT_NE(config_error("hidden_size: 18\nnum_attention_heads: 4\n").find("model.model_config.num_attention_heads"),
            std::string::npos);
  EXPECT_NE(config_error(tiny_yaml(false, "vocab_size_x: 3\n")).find("unknown key"), std::string::npos);
  EXPECT_NE(config_error("hidden_size: 0\n").find("model.model_config.hidden_size"), std::string::npos);
  EXPECT_NE(config_error(tiny_yaml(false, "no_rope_layer: 0\n"))
                .find("model.model_config.no_rope_layer: must be a positive interval"),
            std::string::npos);
  EXPECT_NE(config_error(tiny_yaml(false, "_attn_implementation: paged\n"))
                .find("model.model_config._attn_implementation: 'paged' is not implemented"),
            std::string::npos);
  EXPECT_NE(config_error(tiny_yaml(false, "rope_scaling: {rope_type: yarn, factor: 2.0}\n"))
                .find("model.model_config.rope_scaling.rope_type"),
            std::string::npos);
  EXPECT_NE(config_error(tiny_yaml(false, "rope_scaling: {rope_type: llama3, factor: 8.0}\n"))
                .find("model.model_config.rope_scaling.low_freq_factor"),
            std::string::npos);
  EXPECT_NE(config_error(tiny_yaml(false, "z_loss_coefficient: -1.0\n")).find("model.model_config.z_loss_coefficient"),
            std::string::npos);
  EXPECT_NE(config_error(tiny_yaml(false), "{std: 0.02, bogus: 1}").find("model.init_method.bogus"), std::string::npos);
  // A checkpoint path is the host's business: the plugin initialises as usual (the host then
  // copies the stored weights over), with `std` from the model config.
  EXPECT_NO_THROW(build(tiny_yaml(false), make_context(2, at::kFloat, "{path: /some/checkpoint}")));
}

// Each rank checks the tensor-parallel split before it allocates or communicates anything (these
// builds have tp_size > 1 and no host): the error names the key on every rank alike.
TEST(LlamaConfig, TensorParallelSplitErrorsNameTheKey) {
  auto split_error = [](const std::string& yaml, int tp_size) -> std::string {
    ModelContext context = make_context(2, at::kFloat);
    context.tp_size = tp_size;
    try {
      build(yaml, context);
    } catch (const triax::ConfigError& e) {
      return e.what();
    }
    return "(no ConfigError)";
  };
  // tiny: hidden 16, 4 heads, 2 kv heads, ffn 24.
  const std::string hidden = split_error(tiny_yaml(false), 3);
  EXPECT_NE(hidden.find("model.model_config.hidden_size"), std::string::npos) << hidden;
  EXPECT_NE(hidden.find("tensor parallel size 3"), std::string::npos) << hidden;
  const std::string kv_heads = split_error(tiny_yaml(false), 4);
  EXPECT_NE(kv_heads.find("model.model_config.num_key_value_heads"), std::string::npos) << kv_heads;
  const std::string heads = split_error(tiny_yaml(false), 8);
  EXPECT_NE(heads.find("model.model_config.num_attention_heads"), std::string::npos) << heads;
  const std::string ffn = split_error(
      "hidden_size: 16\nnum_attention_heads: 4\nnum_key_value_heads: 2\nintermediate_size: 25\nvocab_size: 30\n", 2);
  EXPECT_NE(ffn.find("model.model_config.intermediate_size"), std::string::npos) << ffn;
}

TEST(LlamaConfig, NanotronConfigLoadsAndResolves) {
  // model_config as nanotron writes it (every LlamaConfig field).
  const std::string nanotron =
      "bos_token_id: 1\neos_token_id: 2\nhidden_act: silu\nhidden_size: 16\ninitializer_range: 0.02\n"
      "intermediate_size: 24\nis_llama_config: true\nmax_position_embeddings: 32\nnum_attention_heads: 4\n"
      "num_hidden_layers: 2\nattention_bias: false\nnum_key_value_heads: null\npad_token_id: null\n"
      "pretraining_tp: 1\nrms_norm_eps: 1.0e-05\nrope_scaling: null\nrope_theta: 10000.0\n"
      "rope_interleaved: false\ntie_word_embeddings: true\nuse_cache: true\nvocab_size: 32\n"
      "_attn_implementation: flash_attention_2\nz_loss_enabled: false\nz_loss_coefficient: 0.0001\n";
  auto model = build(nanotron, make_context(2, at::kFloat));
  EXPECT_EQ(model->config().num_key_value_heads, 4);
  YAML::Node resolved = YAML::Load(model->resolved_config());
  EXPECT_EQ(resolved["num_key_value_heads"].as<int64_t>(), 4);
  EXPECT_EQ(resolved["hidden_size"].as<int64_t>(), 16);

  // Defaults are recorded too.
  YAML::Node defaults = YAML::Load(build(tiny_yaml(false), make_context(2, at::kFloat))->resolved_config());
  EXPECT_EQ(defaults["rope_theta"].as<double>(), 10000.0);
  EXPECT_EQ(defaults["rope_interleaved"].as<bool>(), false);
  EXPECT_EQ(defaults["hidden_act"].as<std::string>(), "silu");

  // attention_bias adds the Hugging Face bias parameters.
  auto biased = build(tiny_yaml(false, "attention_bias: true\n"), make_context(2, at::kFloat));
  auto p = parameters_by_name(*biased);
  EXPECT_EQ(p.count("model.layers.0.self_attn.qkv_proj.bias"), 1u);
  EXPECT_EQ(p.count("model.layers.1.self_attn.o_proj.bias"), 1u);
  int64_t numel = 0;
  for (const auto& entry : biased->parameter_table()) numel += entry.tensor.numel();
  EXPECT_EQ(numel, biased->total_parameters());
}

// ---- through the plugin ABI ------------------------------------------------------------------

TEST(LlamaPlugin, WorksThroughTheCAbi) {
  const triax_model_vtable* vtable = triax::detail::ModelAdapter<LlamaModel>::vtable();
  const std::string yaml = tiny_yaml(true);
  triax_error error{};
  int32_t count = 0;
  double costs[8] = {};
  ASSERT_EQ(vtable->describe_blocks(yaml.c_str(), 8, costs, 8, &count, &error), TRIAX_OK) << error.message;
  EXPECT_EQ(count, 4);
  EXPECT_DOUBLE_EQ(costs[3], 2.0 * 16 * 30);

  triax_model_context context{};
  context.struct_size = sizeof(context);
  context.tp_size = context.pp_size = context.dp_size = 1;
  context.first_block = 0;
  context.last_block = 4;
  context.device = "cpu";
  context.dtype = "float32";
  context.seed = 7;
  context.init_method_yaml = "{std: 0.02}";
  context.make_vocab_size_divisible_by = 16;
  triax_model* model = nullptr;
  ASSERT_EQ(vtable->create(yaml.c_str(), &context, &model, &error), TRIAX_OK) << error.message;
  EXPECT_EQ(vtable->parameter_count(model), 14);  // embedding, norm, 6 per layer (q/k/v and gate/up fused)
  const int64_t per_layer = 16 * 16 + 2 * 8 * 16 + 16 * 16 + 3 * 16 * 24 + 2 * 16;
  EXPECT_EQ(vtable->total_parameters(model), 32 * 16 + 2 * per_layer + 16);  // tied: no lm_head
  triax_parameter_info info{};
  ASSERT_EQ(vtable->parameter_info(model, 0, &info, &error), TRIAX_OK) << error.message;
  at::Tensor embedding = triax::adopt_handle(info.tensor);
  EXPECT_STREQ(info.name, "model.embed_tokens.weight");
  EXPECT_EQ(info.ndim, 2);
  EXPECT_EQ(info.global_shape[0], 32);
  EXPECT_EQ(info.global_shape[1], 16);
  EXPECT_EQ(embedding.sizes(), (std::vector<int64_t>{32, 16}));
  EXPECT_NE(vtable->parameter_info(model, 20, &info, &error), TRIAX_OK);
  EXPECT_NE(std::string(vtable->resolved_config(model)).find("hidden_size: 16"), std::string::npos);

  Batch b = make_batch(2, 8, 30, 71);
  triax_stage_io io{};
  io.struct_size = sizeof(io);
  io.input_ids = triax::borrow_handle(b.ids);
  io.label_ids = triax::borrow_handle(b.labels);
  io.label_mask = triax::borrow_handle(b.mask);
  ASSERT_EQ(vtable->forward(model, &io, &error), TRIAX_OK) << error.message;
  EXPECT_EQ(io.hidden_out, nullptr);
  at::Tensor loss = triax::adopt_handle(io.loss);
  ASSERT_TRUE(loss.defined());
  EXPECT_EQ(loss.scalar_type(), at::kFloat);
  EXPECT_TRUE(std::isfinite(loss.item<double>()));
  EXPECT_DOUBLE_EQ(vtable->flops_per_token(model, 8), 3.0 * (2 * 4352.0 + 960.0));
  vtable->destroy(model);

  const std::string bad = tiny_yaml(true, "hidden_act: relu\n");
  EXPECT_EQ(vtable->create(bad.c_str(), &context, &model, &error), TRIAX_ERROR_INVALID_CONFIG);
  EXPECT_NE(std::string(error.message).find("model.model_config.hidden_act"), std::string::npos) << error.message;
  // init_method.path is the host's (it loads the weights after create): the plugin accepts it.
  context.init_method_yaml = "{path: checkpoints/10}";
  ASSERT_EQ(vtable->create(yaml.c_str(), &context, &model, &error), TRIAX_OK) << error.message;
  vtable->destroy(model);
}

}  // namespace
