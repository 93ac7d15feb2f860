// The llama model plugin against independent references written here with plain ATen ops:
// RMSNorm, rotary embeddings (and Llama-3 frequency scaling), grouped-query attention, the SwiGLU
// MLP, the whole model's loss, finite-difference gradients in float64, parameter names and
// counts, FLOPs, pipeline stages and config errors.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "attention.hpp"
#include "llama_model.hpp"
#include "mlp.hpp"
#include "rotary_embedding.hpp"
#include "triax/config_reader.hpp"
#include "triax/error.hpp"
#include "triax/layers/fused_ops.hpp"
#include "triax/layers/norm.hpp"
#include "triax/plugin.hpp"
#include "triax/tensor_handle.hpp"

namespace {

using triax::ConfigReader;
using triax::ModelContext;
using triax::llama::LlamaConfig;
using triax::llama::LlamaModel;

constexpr double kPi = 3.141592653589793;

// hidden 16, 4 heads of 4, 2 kv heads, ffn 24, vocab 30 (padded to 32 below), 2 layers.
std::string tiny_yaml(bool tied, const std::string& extra = "") {
  return "hidden_size: 16\n"
         "num_attention_heads: 4\n"
         "num_key_value_heads: 2\n"
         "intermediate_size: 24\n"
         "num_hidden_layers: 2\n"
         "vocab_size: 30\n"
         "max_position_embeddings: 32\n"
         "rms_norm_eps: 1.0e-5\n"
         "tie_word_embeddings: " +
         std::string(tied ? "true" : "false") + "\n" + extra;
}

ModelContext make_context(int64_t layers, c10::ScalarType dtype, const std::string& init = "{std: 0.02}") {
  ModelContext context;
  context.dtype = dtype;
  context.device = c10::Device(c10::kCPU);
  context.first_block = 0;
  context.last_block = static_cast<int>(layers + 2);
  context.seed = 1234;
  context.init_method = YAML::Load(init);
  context.make_vocab_size_divisible_by = 16;
  return context;
}

LlamaConfig read_config(const std::string& yaml) {
  ConfigReader reader = ConfigReader::from_text(yaml, "model.model_config");
  return LlamaConfig::read(reader);
}

std::shared_ptr<LlamaModel> build(const std::string& yaml, const ModelContext& context) {
  ConfigReader reader = ConfigReader::from_text(yaml, "model.model_config");
  return LlamaModel::create(reader, context);
}

std::map<std::string, at::Tensor> parameters_by_name(LlamaModel& model) {
  std::map<std::string, at::Tensor> out;
  for (const auto& p : model.parameter_table()) out[p.name] = p.tensor;
  return out;
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// ---- references ----------------------------------------------------------------------------

at::Tensor ref_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  at::Tensor xd = x.to(at::kDouble);
  return xd / at::sqrt((xd * xd).mean(-1, true) + eps) * weight.to(at::kDouble);
}

// theta^(-2i/d), i = 0..d/2-1
std::vector<double> ref_default_frequencies(double theta, int64_t head_dim) {
  std::vector<double> out;
  for (int64_t i = 0; i < head_dim / 2; ++i)
    out.push_back(std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim)));
  return out;
}

// Rotates the pair (x[i], x[i + d/2]), read as the complex number x[i] + j x[i + d/2], by the
// angle position * frequency[i]. x: [batch, heads, seq, d] (positions 0..seq-1), in double.
at::Tensor ref_rope(const at::Tensor& x, const std::vector<double>& frequencies) {
  const int64_t seq = x.size(2), half = x.size(3) / 2;
  at::Tensor angles = at::empty({seq, half}, at::kDouble);
  auto a = angles.accessor<double, 2>();
  for (int64_t p = 0; p < seq; ++p)
    for (int64_t i = 0; i < half; ++i) a[p][i] = static_cast<double>(p) * frequencies[static_cast<size_t>(i)];
  at::Tensor rotation = at::polar(at::ones_like(angles), angles);
  at::Tensor xd = x.to(at::kDouble);
  at::Tensor z = at::complex(xd.narrow(-1, 0, half).contiguous(), xd.narrow(-1, half, half).contiguous());
  at::Tensor r = z * rotation;
  return at::cat({at::real(r), at::imag(r)}, -1);
}

// softmax(Q K^T / sqrt(d) + causal mask) V per head, query head j reading kv head j / (H / KV),
// then the output projection. Weights [out, in]; everything in double.
at::Tensor ref_attention(const at::Tensor& x, const at::Tensor& wq, const at::Tensor& wk, const at::Tensor& wv,
                         const at::Tensor& wo, int64_t heads, int64_t kv_heads,
                         const std::vector<double>& frequencies) {
  at::Tensor xd = x.to(at::kDouble);
  const int64_t b = xd.size(0), s = xd.size(1), d = wq.size(0) / heads;
  auto split = [&](const at::Tensor& w, int64_t n) {
    return at::matmul(xd, w.to(at::kDouble).t()).view({b, s, n, d}).permute({0, 2, 1, 3});
  };
  at::Tensor q = ref_rope(split(wq, heads), frequencies);
  at::Tensor k = ref_rope(split(wk, kv_heads), frequencies);
  at::Tensor v = split(wv, kv_heads);
  at::Tensor future = at::ones({s, s}, at::kBool).triu(1);
  std::vector<at::Tensor> outputs;
  for (int64_t j = 0; j < heads; ++j) {
    const int64_t g = j / (heads / kv_heads);
    at::Tensor scores = at::matmul(q.select(1, j), k.select(1, g).transpose(-1, -2));
    scores = scores / std::sqrt(static_cast<double>(d));
    scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
    at::Tensor e = at::exp(scores - std::get<0>(scores.max(-1, true)));
    at::Tensor probabilities = e / e.sum(-1, true);
    outputs.push_back(at::matmul(probabilities, v.select(1, g)));  // [b, s, d]
  }
  at::Tensor attended = at::stack(outputs, 2).reshape({b, s, heads * d});
  return at::matmul(attended, wo.to(at::kDouble).t());
}

at::Tensor ref_mlp(const at::Tensor& x, const at::Tensor& wg, const at::Tensor& wu, const at::Tensor& wd) {
  at::Tensor xd = x.to(at::kDouble);
  at::Tensor gate = at::matmul(xd, wg.to(at::kDouble).t());
  at::Tensor silu = gate / (1.0 + at::exp(-gate));
  return at::matmul(silu * at::matmul(xd, wu.to(at::kDouble).t()), wd.to(at::kDouble).t());
}

// The whole model's masked mean cross-entropy, from its parameters by name.
at::Tensor ref_loss(std::map<std::string, at::Tensor> p, const LlamaConfig& c, const at::Tensor& ids,
                    const at::Tensor& labels, const at::Tensor& mask) {
  std::vector<double> frequencies = ref_default_frequencies(c.rope_theta, c.head_dim());
  at::Tensor h = p.at("model.embed_tokens.weight").to(at::kDouble).index_select(0, ids.reshape({-1}));
  h = h.view({ids.size(0), ids.size(1), c.hidden_size});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string pre = "model.layers." + std::to_string(l) + ".";
    at::Tensor a = ref_rms_norm(h, p.at(pre + "input_layernorm.weight"), c.rms_norm_eps);
    h = h + ref_attention(a, p.at(pre + "self_attn.q_proj.weight"), p.at(pre + "self_attn.k_proj.weight"),
                          p.at(pre + "self_attn.v_proj.weight"), p.at(pre + "self_attn.o_proj.weight"),
                          c.num_attention_heads, c.num_key_value_heads, frequencies);
    at::Tensor m = ref_rms_norm(h, p.at(pre + "post_attention_layernorm.weight"), c.rms_norm_eps);
    h = h + ref_mlp(m, p.at(pre + "mlp.gate_proj.weight"), p.at(pre + "mlp.up_proj.weight"),
                    p.at(pre + "mlp.down_proj.weight"));
  }
  h = ref_rms_norm(h, p.at("model.norm.weight"), c.rms_norm_eps);
  at::Tensor head = p.count("lm_head.weight") ? p.at("lm_head.weight") : p.at("model.embed_tokens.weight");
  at::Tensor logits = at::matmul(h, head.to(at::kDouble).t()).narrow(-1, 0, c.vocab_size).reshape({-1, c.vocab_size});
  at::Tensor log_probabilities = logits - at::logsumexp(logits, -1, true);
  at::Tensor nll = -log_probabilities.gather(1, labels.reshape({-1, 1})).squeeze(1);
  at::Tensor w = mask.reshape({-1}).to(at::kDouble);
  return (nll * w).sum() / w.sum();
}

struct Batch {
  at::Tensor ids, labels, mask;
};

Batch make_batch(int64_t batch, int64_t seq, int64_t vocab, uint64_t seed) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
  Batch out;
  out.ids = at::randint(vocab, {batch, seq}, g, at::kLong);
  out.labels = at::randint(vocab, {batch, seq}, g, at::kLong);
  out.mask = at::ones({batch, seq}, at::kFloat);
  out.mask[0][0].fill_(0.0);
  out.mask[1][seq - 1].fill_(0.0);
  return out;
}

triax::StageInput stage_input(const Batch& b) {
  triax::StageInput in;
  in.input_ids = b.ids;
  in.label_ids = b.labels;
  in.label_mask = b.mask;
  return in;
}

void fill_normal(const at::Tensor& t, double std, uint64_t seed) {
  at::NoGradGuard guard;
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
  t.copy_(at::normal(0.0, std, t.sizes(), g));
}

// ---- components -----------------------------------------------------------------------------

TEST(LlamaComponents, RmsNormMatchesFormula) {
  for (c10::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    triax::RMSNorm norm(16, 1e-5, c10::Device(c10::kCPU), dtype);
    fill_normal(norm.weight, 1.0, 3);
    at::Generator g = at::make_generator<at::CPUGeneratorImpl>(4);
    at::Tensor x = (at::randn({2, 5, 16}, g) * 3.0).to(dtype);
    at::Tensor y = norm.forward(x);
    EXPECT_EQ(y.scalar_type(), dtype);
    at::Tensor expected = ref_rms_norm(x, norm.weight, 1e-5);
    // bf16: the normalised value and the product are each rounded to 8 significant bits.
    const double rtol = dtype == at::kFloat ? 1e-6 : 1e-2;
    EXPECT_TRUE(at::allclose(y.to(at::kDouble), expected, rtol, 1e-5)) << c10::toString(dtype);
  }
}

TEST(LlamaComponents, RotaryMatchesComplexRotation) {
  LlamaConfig c = read_config("hidden_size: 64\nnum_attention_heads: 2\nmax_position_embeddings: 16\n");
  ASSERT_EQ(c.head_dim(), 32);
  triax::llama::RotaryEmbedding rope(c, c10::Device(c10::kCPU));
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(5);
  at::Tensor x = at::randn({2, 3, 16, 32}, g);
  auto [cos, sin] = rope.tables(16, at::kFloat);
  at::Tensor y = triax::apply_rotary(x, cos, sin);
  at::Tensor expected = ref_rope(x, ref_default_frequencies(10000.0, 32));
  EXPECT_LT(max_abs_diff(y, expected), 2e-5);
  // The first position is not rotated at all.
  EXPECT_EQ(max_abs_diff(y.select(2, 0), x.select(2, 0)), 0.0);
  EXPECT_THROW(rope.tables(17, at::kFloat), triax::Error);
}

TEST(LlamaComponents, Llama3FrequencyScaling) {
  LlamaConfig c = read_config(
      "hidden_size: 256\nnum_attention_heads: 2\nrope_theta: 500000.0\nmax_position_embeddings: 64\n"
      "rope_scaling: {rope_type: llama3, factor: 8.0, low_freq_factor: 1.0, high_freq_factor: 4.0,"
      " original_max_position_embeddings: 8192}\n");
  at::Tensor inv = triax::llama::rope_inverse_frequencies(c);
  ASSERT_EQ(inv.scalar_type(), at::kFloat);
  ASSERT_EQ(inv.numel(), 64);
  // The documented formula: wavelength 2*pi/f; below old/high_freq_factor unchanged, above
  // old/low_freq_factor divided by factor, in between (1 - s) f / factor + s f with
  // s = (old / wavelength - low) / (high - low).
  const double factor = 8.0, low = 1.0, high = 4.0, old = 8192.0;
  std::vector<double> base = ref_default_frequencies(500000.0, 128);
  int unchanged = 0, divided = 0, smoothed = 0;
  for (int64_t i = 0; i < 64; ++i) {
    const double f = base[static_cast<size_t>(i)];
    const double wavelength = 2.0 * kPi / f;
    double expected;
    if (wavelength < old / high) {
      expected = f;
      ++unchanged;
    } else if (wavelength > old / low) {
      expected = f / factor;
      ++divided;
    } else {
      const double s = (old / wavelength - low) / (high - low);
      expected = (1.0 - s) * f / factor + s * f;
      ++smoothed;
    }
    EXPECT_NEAR(inv[i].item<double>(), expected, 5e-6 * expected) << "frequency " << i;
  }
  EXPECT_GT(unchanged, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(smoothed, 0);

  // linear scaling divides every frequency.
  LlamaConfig linear =
      read_config("hidden_size: 256\nnum_attention_heads: 2\nrope_scaling: {type: linear, factor: 4.0}\n");
  at::Tensor inv_linear = triax::llama::rope_inverse_frequencies(linear);
  std::vector<double> plain = ref_default_frequencies(10000.0, 128);
  for (int64_t i = 0; i < 64; ++i) {
    const double f = plain[static_cast<size_t>(i)];
    EXPECT_NEAR(inv_linear[i].item<double>(), f / 4.0, 5e-6 * f);
  }
}

TEST(LlamaComponents, GroupedQueryAttentionMatchesExplicitSoftmax) {
  LlamaConfig c =
      read_config("hidden_size: 32\nnum_attention_heads: 4\nnum_key_value_heads: 2\nmax_position_embeddings: 16\n");
  ModelContext context = make_context(1, at::kDouble);
  triax::llama::LlamaAttention attention(c, context);
  fill_normal(attention.q_proj->weight, 0.3, 11);
  fill_normal(attention.k_proj->weight, 0.3, 12);
  fill_normal(attention.v_proj->weight, 0.3, 13);
  fill_normal(attention.o_proj->weight, 0.3, 14);
  EXPECT_EQ(attention.k_proj->weight.size(0), 16);  // 2 kv heads of 8
  triax::llama::RotaryEmbedding rope(c, context.device);
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(15);
  at::Tensor x = at::randn({2, 12, 32}, g, at::kDouble);
  auto [cos, sin] = rope.tables(12, at::kDouble);
  at::Tensor y = attention.forward(x, cos, sin);
  at::Tensor expected = ref_attention(x, attention.q_proj->weight, attention.k_proj->weight, attention.v_proj->weight,
                                      attention.o_proj->weight, 4, 2, ref_default_frequencies(10000.0, 8));
  ASSERT_EQ(y.sizes(), expected.sizes());
  // The cos/sin tables are fp32 (as in transformers): angles carry fp32 rounding.
  EXPECT_LT(max_abs_diff(y, expected), 1e-6);
  // fp32 module against the same reference
  ModelContext context32 = make_context(1, at::kFloat);
  triax::llama::LlamaAttention attention32(c, context32);
  {
    at::NoGradGuard guard;
    attention32.q_proj->weight.copy_(attention.q_proj->weight);
    attention32.k_proj->weight.copy_(attention.k_proj->weight);
    attention32.v_proj->weight.copy_(attention.v_proj->weight);
    attention32.o_proj->weight.copy_(attention.o_proj->weight);
  }
  auto [cos32, sin32] = rope.tables(12, at::kFloat);
  EXPECT_LT(max_abs_diff(attention32.forward(x.to(at::kFloat), cos32, sin32), expected), 2e-5);
}

TEST(LlamaComponents, SwiGluMatchesFormula) {
  LlamaConfig c = read_config("hidden_size: 16\nnum_attention_heads: 4\nintermediate_size: 40\n");
  triax::llama::LlamaMLP mlp(c, make_context(1, at::kDouble));
  fill_normal(mlp.gate_proj->weight, 0.5, 21);
  fill_normal(mlp.up_proj->weight, 0.5, 22);
  fill_normal(mlp.down_proj->weight, 0.5, 23);
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(24);
  at::Tensor x = at::randn({3, 7, 16}, g, at::kDouble);
  at::Tensor expected = ref_mlp(x, mlp.gate_proj->weight, mlp.up_proj->weight, mlp.down_proj->weight);
  EXPECT_LT(max_abs_diff(mlp.forward(x), expected), 1e-12);
}

// ---- the whole model ------------------------------------------------------------------------

TEST(LlamaModel, LossMatchesReference) {
  for (bool tied : {false, true}) {
    auto model = build(tiny_yaml(tied), make_context(2, at::kDouble, "{std: 0.2}"));
    Batch b = make_batch(2, 8, 30, 31);
    triax::StageOutput out = model->forward(stage_input(b));
    ASSERT_TRUE(out.loss.defined());
    EXPECT_FALSE(out.hidden_out.defined());
    EXPECT_EQ(out.loss.dim(), 0);
    at::Tensor expected = ref_loss(parameters_by_name(*model), model->config(), b.ids, b.labels, b.mask);
    EXPECT_NEAR(out.loss.item<double>(), expected.item<double>(), 1e-6 * expected.item<double>()) << "tied " << tied;
  }
}

TEST(LlamaModel, FiniteDifferenceGradientsInDouble) {
  for (bool tied : {false, true}) {
    auto model = build(tiny_yaml(tied), make_context(2, at::kDouble, "{std: 0.2}"));
    Batch b = make_batch(2, 8, 30, 41);
    triax::StageInput in = stage_input(b);
    at::Tensor loss = model->forward(in).loss;
    ASSERT_EQ(loss.scalar_type(), at::kDouble);
    loss.backward();

    auto params = parameters_by_name(*model);
    std::vector<std::string> checked = {"model.embed_tokens.weight",
                                        "model.layers.0.self_attn.q_proj.weight",
                                        "model.layers.1.self_attn.k_proj.weight",
                                        "model.layers.1.mlp.down_proj.weight",
                                        "model.layers.0.input_layernorm.weight",
                                        "model.norm.weight"};
    if (!tied) checked.push_back("lm_head.weight");
    at::Generator g = at::make_generator<at::CPUGeneratorImpl>(42);
    const double step = 1e-5;
    for (const std::string& name : checked) {
      at::Tensor p = params.at(name);
      ASSERT_TRUE(p.grad().defined()) << name;
      at::Tensor flat = p.detach().view({-1});
      at::Tensor grad = p.grad().view({-1});
      std::vector<int64_t> entries;
      at::Tensor picks = at::randint(flat.numel(), {5}, g, at::kLong);
      for (int64_t i = 0; i < 5; ++i) entries.push_back(picks[i].item<int64_t>());
      if (name == "model.embed_tokens.weight") entries.push_back(b.ids[0][1].item<int64_t>() * 16 + 3);  // a used row
      std::vector<double> analytic, numeric;
      for (int64_t e : entries) {
        at::NoGradGuard guard;
        double* value = flat.data_ptr<double>() + e;
        const double original = *value;
        *value = original + step;
        const double up = model->forward(in).loss.item<double>();
        *value = original - step;
        const double down = model->forward(in).loss.item<double>();
        *value = original;
        numeric.push_back((up - down) / (2.0 * step));
        analytic.push_back(grad[e].item<double>());
      }
      double diff2 = 0.0, ref2 = 0.0, ref_max = 0.0, diff_max = 0.0;
      for (size_t i = 0; i < entries.size(); ++i) {
        const double d = analytic[i] - numeric[i];
        diff2 += d * d;
        ref2 += numeric[i] * numeric[i];
        ref_max = std::max(ref_max, std::abs(numeric[i]));
        diff_max = std::max(diff_max, std::abs(d));
      }
      ASSERT_GT(ref_max, 1e-8) << name << ": sampled gradients are all zero";
      EXPECT_LE(std::sqrt(diff2 / ref2), 1e-6) << name << " (tied " << tied << ")";
      EXPECT_LE(diff_max, 1e-6 * ref_max) << name << " (tied " << tied << ")";
    }
  }
}

TEST(LlamaModel, ParameterNamesShapesAndCounts) {
  const std::vector<std::pair<std::string, std::vector<int64_t>>> layer = {
      {"self_attn.q_proj.weight", {16, 16}},    {"self_attn.k_proj.weight", {8, 16}},
      {"self_attn.v_proj.weight", {8, 16}},     {"self_attn.o_proj.weight", {16, 16}},
      {"mlp.gate_proj.weight", {24, 16}},       {"mlp.up_proj.weight", {24, 16}},
      {"mlp.down_proj.weight", {16, 24}},       {"input_layernorm.weight", {16}},
      {"post_attention_layernorm.weight", {16}}};
  for (bool tied : {false, true}) {
    auto model = build(tiny_yaml(tied), make_context(2, at::kFloat));
    std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {{"model.embed_tokens.weight", {32, 16}}};
    for (int l = 0; l < 2; ++l)
      for (const auto& [name, shape] : layer)
        expected.push_back({"model.layers." + std::to_string(l) + "." + name, shape});
    expected.push_back({"model.norm.weight", {16}});
    if (!tied) expected.push_back({"lm_head.weight", {32, 16}});

    const auto& table = model->parameter_table();
    ASSERT_EQ(table.size(), expected.size()) << "tied " << tied;
    int64_t numel = 0;
    for (size_t i = 0; i < table.size(); ++i) {
      EXPECT_EQ(table[i].name, expected[i].first);
      EXPECT_EQ(table[i].tensor.sizes().vec(), expected[i].second) << table[i].name;
      EXPECT_EQ(table[i].spec.global_shape, expected[i].second) << table[i].name;
      EXPECT_EQ(table[i].tensor.scalar_type(), at::kFloat);
      EXPECT_EQ(table[i].spec.flags & TRIAX_PARAM_TIED, 0u) << table[i].name;
      numel += table[i].tensor.numel();
    }
    const int64_t per_layer = 16 * 16 + 2 * 8 * 16 + 16 * 16 + 3 * 16 * 24 + 2 * 16;
    const int64_t expected_total = 32 * 16 + 2 * per_layer + 16 + (tied ? 0 : 32 * 16);
    EXPECT_EQ(numel, expected_total);
    EXPECT_EQ(model->total_parameters(), expected_total);
  }
}

TEST(LlamaModel, InitialisationFollowsInitMethod) {
  // Big enough for the sample std to be meaningful: 4 layers, hidden 64.
  const std::string yaml =
      "hidden_size: 64\nnum_attention_heads: 4\nintermediate_size: 128\nnum_hidden_layers: 8\nvocab_size: 256\n"
      "max_position_embeddings: 8\ninitializer_range: 0.05\n";
  auto check = [&](const std::string& init, double std) {
    auto model = build(yaml, make_context(8, at::kFloat, init));
    auto p = parameters_by_name(*model);
    const double out_std = std / std::sqrt(16.0);
    EXPECT_NEAR(p.at("model.embed_tokens.weight").std().item<double>(), std, 0.05 * std);
    EXPECT_NEAR(p.at("model.layers.3.self_attn.q_proj.weight").std().item<double>(), std, 0.05 * std);
    EXPECT_NEAR(p.at("model.layers.3.self_attn.o_proj.weight").std().item<double>(), out_std, 0.05 * out_std);
    EXPECT_NEAR(p.at("model.layers.3.mlp.down_proj.weight").std().item<double>(), out_std, 0.05 * out_std);
    EXPECT_EQ(p.at("model.layers.3.input_layernorm.weight").min().item<double>(), 1.0);
    EXPECT_EQ(p.at("model.norm.weight").max().item<double>(), 1.0);
  };
  check("{std: 0.02}", 0.02);
  check("{}", 0.05);  // initializer_range
  // Same seed and name, same values.
  auto a = build(yaml, make_context(8, at::kFloat));
  auto b = build(yaml, make_context(8, at::kFloat));
  EXPECT_TRUE(at::equal(parameters_by_name(*a).at("lm_head.weight"), parameters_by_name(*b).at("lm_head.weight")));
}

TEST(LlamaModel, FlopsAndBlockCosts) {
  // h 16, q 16, kv 8, ffn 24, V 30, L 2, seq 8:
  // proj = 16*(16+2*8) + 16*16 = 768, mlp = 3*16*24 = 1152, attn = 2*8*16 = 256
  // forward = 2*2*(768+1152) + 2*2*256 + 2*16*30 = 7680 + 1024 + 960 = 9664; training = 3x.
  auto model = build(tiny_yaml(false), make_context(2, at::kFloat));
  EXPECT_DOUBLE_EQ(model->flops_per_token(8), 28992.0);
  ConfigReader reader = ConfigReader::from_text(tiny_yaml(false), "model.model_config");
  std::vector<double> costs = LlamaModel::block_costs(reader, 8);
  ASSERT_EQ(costs.size(), 4u);  // L + 2
  EXPECT_DOUBLE_EQ(costs[0], 0.0);
  EXPECT_DOUBLE_EQ(costs[1], 4352.0);
  EXPECT_DOUBLE_EQ(costs[2], 4352.0);
  EXPECT_DOUBLE_EQ(costs[3], 960.0);
  // SmolLM-135M shape against the peer benchmark's formula, evaluated by hand:
  // h 576, 9 heads of 64, 3 kv heads, ffn 1536, L 30, V 49152, seq 2048.
  auto smol = std::string(
      "hidden_size: 576\nnum_attention_heads: 9\nnum_key_value_heads: 3\nintermediate_size: 1536\n"
      "num_hidden_layers: 30\nvocab_size: 49152\nmax_position_embeddings: 2048\n");
  ConfigReader smol_reader = ConfigReader::from_text(smol, "model.model_config");
  std::vector<double> smol_costs = LlamaModel::block_costs(smol_reader, 2048);
  double forward = 0.0;
  for (double c : smol_costs) forward += c;
  const double proj = 576.0 * (576 + 2 * 192) + 576.0 * 576, mlp = 3.0 * 576 * 1536, attn = 2.0 * 2048 * 576;
  EXPECT_DOUBLE_EQ(forward, 2 * 30 * (proj + mlp) + 2 * 30 * attn + 2.0 * 576 * 49152);
}

TEST(LlamaModel, PipelineStagesComposeToTheWholeModel) {
  for (bool tied : {false, true}) {
    auto whole = build(tiny_yaml(tied), make_context(2, at::kDouble));
    ModelContext first = make_context(2, at::kDouble);
    first.pp_size = 2;
    first.last_block = 2;  // embedding + layer 0
    ModelContext second = make_context(2, at::kDouble);
    second.pp_rank = 1;
    second.pp_size = 2;
    second.first_block = 2;  // layer 1 + head
    auto stage0 = build(tiny_yaml(tied), first);
    auto stage1 = build(tiny_yaml(tied), second);

    Batch b = make_batch(2, 8, 30, 51);
    triax::StageOutput out0 = stage0->forward(stage_input(b));
    ASSERT_TRUE(out0.hidden_out.defined());
    EXPECT_FALSE(out0.loss.defined());
    EXPECT_EQ(out0.hidden_out.sizes(), (std::vector<int64_t>{2, 8, 16}));
    triax::StageInput in1 = stage_input(b);
    in1.hidden_in = out0.hidden_out;
    at::Tensor loss = stage1->forward(in1).loss;
    EXPECT_NEAR(loss.item<double>(), whole->forward(stage_input(b)).loss.item<double>(), 1e-12);

    std::vector<std::string> names0, names1;
    for (const auto& p : stage0->parameter_table()) names0.push_back(p.name);
    for (const auto& p : stage1->parameter_table()) names1.push_back(p.name);
    EXPECT_EQ(names0.front(), "model.embed_tokens.weight");
    EXPECT_EQ(names0.back(), "model.layers.0.post_attention_layernorm.weight");
    EXPECT_EQ(names1.front(), tied ? "model.embed_tokens.weight" : "model.layers.1.self_attn.q_proj.weight");
    EXPECT_EQ(names1.back(), tied ? "model.norm.weight" : "lm_head.weight");
    if (tied) {
      // Both stages hold a copy, flagged as one logical parameter, with equal values.
      const auto& e0 = stage0->parameter_table().front();
      const auto& e1 = stage1->parameter_table().front();
      EXPECT_NE(e0.spec.flags & TRIAX_PARAM_TIED, 0u);
      EXPECT_NE(e1.spec.flags & TRIAX_PARAM_TIED, 0u);
      EXPECT_EQ(e0.spec.tied_key, "model.embed_tokens.weight");
      EXPECT_EQ(e1.spec.tied_key, "model.embed_tokens.weight");
      EXPECT_TRUE(at::equal(e0.tensor, e1.tensor));
      EXPECT_FALSE(e0.tensor.is_same(e1.tensor));
    }
  }
}

TEST(LlamaModel, TrainsInBfloat16) {
  auto model = build(tiny_yaml(true), make_context(2, at::kBFloat16));
  Batch b = make_batch(2, 8, 30, 61);
  at::Tensor loss = model->forward(stage_input(b)).loss;
  EXPECT_EQ(loss.scalar_type(), at::kFloat);
  EXPECT_NEAR(loss.item<double>(), std::log(30.0), 0.2);  // std 0.02: nearly uniform
  loss.backward();
  for (const auto& p : model->parameter_table()) {
    ASSERT_TRUE(p.tensor.grad().defined()) << p.name;
    EXPECT_TRUE(at::isfinite(p.tensor.grad()).all().item<bool>()) << p.name;
  }
}

// ---- configuration ----------------------------------------------------------------------------

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
  EXPECT_NE(config_error(tiny_yaml(false, "rope_interleaved: true\n")).find("model.model_config.rope_interleaved"),
            std::string::npos);
  EXPECT_NE(config_error(tiny_yaml(false, "rope_scaling: {rope_type: yarn, factor: 2.0}\n"))
                .find("model.model_config.rope_scaling.rope_type"),
            std::string::npos);
  EXPECT_NE(config_error(tiny_yaml(false, "rope_scaling: {rope_type: llama3, factor: 8.0}\n"))
                .find("model.model_config.rope_scaling.low_freq_factor"),
            std::string::npos);
  EXPECT_NE(config_error(tiny_yaml(false, "z_loss_enabled: true\n")).find("model.model_config.z_loss_enabled"),
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
  EXPECT_EQ(p.count("model.layers.0.self_attn.q_proj.bias"), 1u);
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
  EXPECT_EQ(vtable->parameter_count(model), 20);
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
