// Shared by the Mamba plugin's unit tests (mamba_*_test.cpp): the tiny model they build and an
// independent reference of Hugging Face's MambaForCausalLM computation, written with plain ATen
// ops in double precision (a sequential scan over the tokens).
#pragma once

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "mamba_model.hpp"
#include "model_reference_support.hpp"
#include "triax/config_reader.hpp"

namespace mamba_test {

using triax::ConfigReader;
using triax::ModelContext;
using triax::mamba::MambaModel;

// d_model 16, 2 layers, d_inner 32, d_state 4, d_conv 3, dt_rank auto (1); vocab 30 padded to 32.
inline std::string tiny_yaml(bool tied, const std::string& extra = "") {
  return "d_model: 16\nnum_hidden_layers: 2\nvocab_size: 30\npad_vocab_size_multiple: 8\n"
         "ssm_cfg: {d_state: 4, d_conv: 3, expand: 2}\n"
         "tie_word_embeddings: " +
         std::string(tied ? "true" : "false") + "\n" + extra;
}

using triax::test::random_tokens;
using triax::test::tiny_model_context;

inline std::shared_ptr<MambaModel> build(const std::string& yaml,
                                          const ModelContext& context = tiny_model_context()) {
  ConfigReader reader = ConfigReader::from_text(yaml, "model.model_config");
  return MambaModel::create(reader, context);
}

// The model of `yaml` with the decoding step's fusions off (TRIAX_MAMBA_ADD_NORM=0,
// TRIAX_MAMBA_DT_IN_STEP=0, read as the layers are built), then the switches back to their default.
inline std::shared_ptr<MambaModel> build_unfused(const std::string& yaml,
                                                 const ModelContext& context = tiny_model_context()) {
  const char* switches[] = {"TRIAX_MAMBA_ADD_NORM", "TRIAX_MAMBA_DT_IN_STEP"};
  for (const char* name : switches) setenv(name, "0", 1);
  std::shared_ptr<MambaModel> model = build(yaml, context);
  for (const char* name : switches) unsetenv(name);
  return model;
}

using triax::test::max_abs_diff;
using triax::test::parameters_of;
using triax::test::rms_norm;

// Logits [batch, seq, vocab] of MambaForCausalLM for `ids`, from the model's parameters.
inline at::Tensor reference_logits(MambaModel& model, const at::Tensor& ids) {
  std::map<std::string, at::Tensor> p = parameters_of(model);
  const auto& c = model.config();
  const int64_t d = c.d_inner(), n = c.ssm.d_state, r = c.dt_rank(), k = c.ssm.d_conv;
  const int64_t batch = ids.size(0), seq = ids.size(1);
  at::Tensor x = p.at("backbone.embeddings.weight").index_select(0, ids.reshape({-1})).reshape({batch, seq, -1});
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    const std::string m = "backbone.layers." + std::to_string(layer) + ".mixer.";
    const at::Tensor h = rms_norm(x, p.at("backbone.layers." + std::to_string(layer) + ".norm.weight"), c.rms_norm_eps);
    at::Tensor xz = at::matmul(h, p.at(m + "in_proj.weight").reshape({2 * d, -1}).t());  // [b, s, 2d]
    if (p.count(m + "in_proj.bias")) xz = xz + p.at(m + "in_proj.bias").reshape({2 * d});
    const at::Tensor xs = xz.narrow(2, 0, d), z = xz.narrow(2, d, d);
    // Causal depthwise convolution: output t reads inputs t - k + 1 .. t (zeros before the start).
    const at::Tensor w = p.at(m + "conv1d.weight").squeeze(1);  // [d, k]
    at::Tensor conv = p.at(m + "conv1d.bias").expand({batch, seq, d}).clone();
    for (int64_t j = 0; j < k; ++j) {
      const int64_t shift = k - 1 - j;
      if (shift >= seq) continue;
      conv.narrow(1, shift, seq - shift).add_(xs.narrow(1, 0, seq - shift) * w.select(1, j));
    }
    const at::Tensor u = at::silu(conv);
    const at::Tensor proj = at::matmul(u, p.at(m + "x_proj.weight").t());  // [b, s, r + 2n]
    const at::Tensor delta =
        at::softplus(at::matmul(proj.narrow(2, 0, r), p.at(m + "dt_proj.weight").t()) + p.at(m + "dt_proj.bias"));
    const at::Tensor B = proj.narrow(2, r, n), C = proj.narrow(2, r + n, n);
    const at::Tensor A = -at::exp(p.at(m + "A_log"));  // [d, n]
    at::Tensor state = at::zeros({batch, d, n}, x.options());
    std::vector<at::Tensor> ys;
    for (int64_t t = 0; t < seq; ++t) {
      const at::Tensor dt = delta.select(1, t).unsqueeze(-1);  // [b, d, 1]
      state = at::exp(dt * A) * state + dt * B.select(1, t).unsqueeze(1) * u.select(1, t).unsqueeze(-1);
      ys.push_back((state * C.select(1, t).unsqueeze(1)).sum(-1) + p.at(m + "D") * u.select(1, t));
    }
    const at::Tensor y = at::stack(ys, 1) * at::silu(z);
    x = x + at::matmul(y, p.at(m + "out_proj.weight").t());
    if (p.count(m + "out_proj.bias")) x = x + p.at(m + "out_proj.bias");
  }
  x = rms_norm(x, p.at("backbone.norm_f.weight"), c.rms_norm_eps);
  const at::Tensor head = p.count("lm_head.weight") ? p.at("lm_head.weight") : p.at("backbone.embeddings.weight");
  return at::matmul(x, head.t());
}

}  // namespace mamba_test
