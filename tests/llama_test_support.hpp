// Shared by the Llama plugin's unit tests (llama_*_test.cpp) and the decoding step's tests
// (decode_*_test.cpp): the tiny models they build, and independent references written with plain
// ATen ops in double precision: RMSNorm, rotary embeddings, grouped-query attention, the SwiGLU
// MLP and the whole model's loss.
#pragma once

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "llama_model.hpp"
#include "triax/config_reader.hpp"
#include "triax/layers/grouped_query_attention.hpp"

namespace llama_test {

using triax::ConfigReader;
using triax::ModelContext;
using triax::llama::LlamaConfig;
using triax::llama::LlamaModel;

inline constexpr double kPi = 3.141592653589793;

// A small Llama: 4 query heads over 2 kv heads, 32 positions at most.
inline std::string llama_yaml(int64_t hidden, int64_t intermediate, int64_t layers, int64_t vocab, bool tied) {
  const auto line = [](const char* key, const std::string& value) { return key + (": " + value) + "\n"; };
  return line("hidden_size", std::to_string(hidden)) + line("num_attention_heads", "4") +
         line("num_key_value_heads", "2") + line("intermediate_size", std::to_string(intermediate)) +
         line("num_hidden_layers", std::to_string(layers)) + line("vocab_size", std::to_string(vocab)) +
         line("max_position_embeddings", "32") + line("rms_norm_eps", "1.0e-5") +
         line("tie_word_embeddings", tied ? "true" : "false");
}

// hidden 16, 4 heads of 4, 2 kv heads, ffn 24, vocab 30 (padded to 32 below), 2 layers.
inline std::string tiny_yaml(bool tied, const std::string& extra = "") {
  return llama_yaml(/*hidden=*/16, /*intermediate=*/24, /*layers=*/2, /*vocab=*/30, tied) + extra;
}

inline ModelContext make_context(int64_t layers, c10::ScalarType dtype, const std::string& init = "{std: 0.02}") {
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

inline LlamaConfig read_config(const std::string& yaml) {
  ConfigReader reader = ConfigReader::from_text(yaml, "model.model_config");
  return LlamaConfig::read(reader);
}

inline std::shared_ptr<LlamaModel> build(const std::string& yaml, const ModelContext& context) {
  ConfigReader reader = ConfigReader::from_text(yaml, "model.model_config");
  return LlamaModel::create(reader, context);
}

inline std::map<std::string, at::Tensor> parameters_by_name(LlamaModel& model) {
  std::map<std::string, at::Tensor> out;
  for (const auto& p : model.parameter_table()) out[p.name] = p.tensor;
  return out;
}

inline double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// ---- references ----------------------------------------------------------------------------

inline at::Tensor ref_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  at::Tensor xd = x.to(at::kDouble);
  return xd / at::sqrt((xd * xd).mean(-1, true) + eps) * weight.to(at::kDouble);
}

// theta^(-2i/d), i = 0..d/2-1
inline std::vector<double> ref_default_frequencies(double theta, int64_t head_dim) {
  std::vector<double> out;
  for (int64_t i = 0; i < head_dim / 2; ++i)
    out.push_back(std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim)));
  return out;
}

// Rotates the pair (x[i], x[i + d/2]), read as the complex number x[i] + j x[i + d/2], by the
// angle position * frequency[i]. x: [batch, heads, seq, d] (positions 0..seq-1), in double.
inline at::Tensor ref_rope(const at::Tensor& x, const std::vector<double>& frequencies) {
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
// then the output projection. Weights [out, in]; everything in double. window > 0: query i also
// masks the keys at i - window and before (it sees `window` keys, itself included).
inline at::Tensor ref_attention(const at::Tensor& x, const at::Tensor& wq, const at::Tensor& wk, const at::Tensor& wv,
                         const at::Tensor& wo, int64_t heads, int64_t kv_heads,
                         const std::vector<double>& frequencies, int64_t window = 0) {
  at::Tensor xd = x.to(at::kDouble);
  const int64_t b = xd.size(0), s = xd.size(1), d = wq.size(0) / heads;
  auto split = [&](const at::Tensor& w, int64_t n) {
    return at::matmul(xd, w.to(at::kDouble).t()).view({b, s, n, d}).permute({0, 2, 1, 3});
  };
  at::Tensor q = ref_rope(split(wq, heads), frequencies);
  at::Tensor k = ref_rope(split(wk, kv_heads), frequencies);
  at::Tensor v = split(wv, kv_heads);
  at::Tensor future = at::ones({s, s}, at::kBool).triu(1);
  if (window > 0) future = future | at::ones({s, s}, at::kBool).tril(-window);
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

inline at::Tensor ref_mlp(const at::Tensor& x, const at::Tensor& wg, const at::Tensor& wu, const at::Tensor& wd) {
  at::Tensor xd = x.to(at::kDouble);
  at::Tensor gate = at::matmul(xd, wg.to(at::kDouble).t());
  at::Tensor silu = gate / (1.0 + at::exp(-gate));
  return at::matmul(silu * at::matmul(xd, wu.to(at::kDouble).t()), wd.to(at::kDouble).t());
}

// The whole model's masked mean cross-entropy, from its parameters by name (window: ref_attention's).
inline at::Tensor ref_loss(std::map<std::string, at::Tensor> p, const LlamaConfig& c, const at::Tensor& ids,
                    const at::Tensor& labels, const at::Tensor& mask, int64_t window = 0) {
  std::vector<double> frequencies = ref_default_frequencies(c.rope_theta, c.head_dim());
  at::Tensor h = p.at("model.embed_tokens.weight").to(at::kDouble).index_select(0, ids.reshape({-1}));
  h = h.view({ids.size(0), ids.size(1), c.hidden_size});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string pre = "model.layers." + std::to_string(l) + ".";
    at::Tensor a = ref_rms_norm(h, p.at(pre + "input_layernorm.weight"), c.rms_norm_eps);
    // The fused projections taken apart again: q, k, v grouped by kv head; gate and up stacked.
    const auto [wq, wk, wv] = triax::QkvLayout{c.num_attention_heads, c.num_key_value_heads, c.head_dim()}.split(
        p.at(pre + "self_attn.qkv_proj.weight"));
    h = h + ref_attention(a, wq, wk, wv, p.at(pre + "self_attn.o_proj.weight"), c.num_attention_heads,
                          c.num_key_value_heads, frequencies, window);
    at::Tensor m = ref_rms_norm(h, p.at(pre + "post_attention_layernorm.weight"), c.rms_norm_eps);
    const at::Tensor gate_up = p.at(pre + "mlp.gate_up_proj.weight");
    h = h + ref_mlp(m, gate_up[0], gate_up[1], p.at(pre + "mlp.down_proj.weight"));
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

inline Batch make_batch(int64_t batch, int64_t seq, int64_t vocab, uint64_t seed) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
  Batch out;
  out.ids = at::randint(vocab, {batch, seq}, g, at::kLong);
  out.labels = at::randint(vocab, {batch, seq}, g, at::kLong);
  out.mask = at::ones({batch, seq}, at::kFloat);
  out.mask[0][0].fill_(0.0);
  out.mask[1][seq - 1].fill_(0.0);
  return out;
}

inline triax::StageInput stage_input(const Batch& b) {
  triax::StageInput in;
  in.input_ids = b.ids;
  in.label_ids = b.labels;
  in.label_mask = b.mask;
  return in;
}

inline void fill_normal(const at::Tensor& t, double std, uint64_t seed) {
  at::NoGradGuard guard;
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
  t.copy_(at::normal(0.0, std, t.sizes(), g));
}

}  // namespace llama_test
