// Shared by the mamba2 plugin's unit tests: the tiny model they build and an independent
// reference of Hugging Face's Mamba2ForCausalLM computation, written with plain ATen ops in double
// precision around the sequential SSD scan (mamba2_ssd_reference.hpp).
#pragma once

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mamba2_config.hpp"
#include "mamba2_mixer.hpp"
#include "mamba2_model.hpp"
#include "mamba2_ssd_reference.hpp"
#include "model_reference_support.hpp"
#include "scoped_variable.hpp"
#include "triax/config_reader.hpp"

namespace mamba2_test {

using triax::ConfigReader;
using triax::ModelContext;
using triax::mamba2::Mamba2Model;

// hidden 16, 2 layers, 8 heads of 4 channels in 2 groups, state 4, conv 3, chunks of 4; vocab 30.
inline std::string tiny_yaml(bool tied, const std::string& extra = "") {
  return "hidden_size: 16\nnum_hidden_layers: 2\nvocab_size: 30\nnum_heads: 8\nhead_dim: 4\nstate_size: 4\n"
         "n_groups: 2\nconv_kernel: 3\nchunk_size: 4\ntie_word_embeddings: " +
         std::string(tied ? "true" : "false") + "\n" + extra;
}

using triax::test::random_tokens;
using triax::test::tiny_model_context;

inline std::shared_ptr<Mamba2Model> build(const std::string& yaml,
                                          const ModelContext& context = tiny_model_context()) {
  ConfigReader reader = ConfigReader::from_text(yaml, "model.model_config");
  return Mamba2Model::create(reader, context);
}

// A lone mixer of the model_config keys `yaml` in `context`, each parameter drawn from `g` as
// N(0, 0.2^2) in fp32 and cast to the parameter's type; `g` goes on to draw the caller's inputs.
inline std::shared_ptr<triax::mamba2::Mamba2Mixer> random_mixer(const std::string& yaml, const ModelContext& context,
                                                                at::Generator& g) {
  ConfigReader reader = ConfigReader::from_text(yaml, "model.model_config");
  auto mixer = std::make_shared<triax::mamba2::Mamba2Mixer>(triax::mamba2::Mamba2Config::read(reader), context);
  at::NoGradGuard no_grad;
  for (at::Tensor& p : mixer->parameters()) p.copy_(at::randn(p.sizes(), g, at::kFloat) * 0.2);
  return mixer;
}

using triax::test::max_abs_diff;
using triax::test::parameters_of;
using triax::test::rms_norm;

// A bf16 mixer of the model_config keys `yaml` on `device` (random_mixer, drawn from `seed`), an
// input of `shape` (requiring its gradient) and an output gradient, drawn after its parameters.
struct Bf16MixerStep {
  std::shared_ptr<triax::mamba2::Mamba2Mixer> mixer;
  at::Tensor hidden, grad;
};

inline Bf16MixerStep bf16_mixer_step(const std::string& yaml, c10::Device device, at::IntArrayRef shape,
                                     uint64_t seed) {
  triax::ModelContext context = triax::test::tiny_model_context();
  context.device = device;
  context.dtype = at::kBFloat16;
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
  Bf16MixerStep step;
  step.mixer = random_mixer(yaml, context, g);
  step.hidden = at::randn(shape, g, at::kFloat).to(device, at::kBFloat16).requires_grad_(true);
  step.grad = at::randn(shape, g, at::kFloat).to(device, at::kBFloat16);
  return step;
}

// The step's output, then the gradients of its input and of every parameter.
inline std::vector<at::Tensor> output_and_gradients(const Bf16MixerStep& step) {
  const at::Tensor out = step.mixer->forward(step.hidden);
  out.backward(step.grad);
  std::vector<at::Tensor> result{out.detach(), step.hidden.grad()};
  for (const at::Tensor& p : step.mixer->parameters()) result.push_back(p.grad());
  return result;
}

// One bf16 mixer's output and the gradients of its input and parameters on CUDA, `variable` set to
// `value` for the step: a switch's two paths on the same inputs. 8 heads of 16 in 2 groups, state
// 32, chunks of 64, [2, 200, 64] in: shapes the fused chunk scan takes, a length it pads.
inline std::vector<at::Tensor> cuda_mixer_step(const char* variable, const char* value) {
  const ScopedVariable setting(variable, value);
  return output_and_gradients(
      bf16_mixer_step("hidden_size: 64\nnum_hidden_layers: 1\nvocab_size: 30\nnum_heads: 8\nhead_dim: 16\n"
                      "state_size: 32\nn_groups: 2\nchunk_size: 64\n",
                      at::kCUDA, {2, 200, 64}, 5));
}

// cuda_mixer_step with `variable` at "0" and at "1": the output and every gradient agree within
// `tolerance` of the largest value (triax::test::max_relative_diff).
inline void expect_cuda_mixer_step_switch_within(const char* variable, double tolerance) {
  const std::vector<at::Tensor> off = cuda_mixer_step(variable, "0"), on = cuda_mixer_step(variable, "1");
  ASSERT_EQ(on.size(), off.size());
  for (size_t i = 0; i < off.size(); ++i) {
    ASSERT_TRUE(on[i].defined() && off[i].defined()) << variable << ", tensor " << i;
    EXPECT_LT(triax::test::max_relative_diff(on[i].cpu(), off[i].cpu()), tolerance) << variable << ", tensor " << i;
  }
}

// A parameter grouped by head group [G, parts..., rest] as Hugging Face's tensor: each part's rows
// of every group, part after part, [G x part, rest].
inline at::Tensor hf_rows(const at::Tensor& grouped, const std::vector<int64_t>& parts) {
  std::vector<at::Tensor> blocks;
  int64_t offset = 0;
  for (int64_t part : parts) {
    std::vector<int64_t> shape = grouped.narrow(1, offset, part).sizes().vec();
    shape.erase(shape.begin());
    shape[0] = -1;
    blocks.push_back(grouped.narrow(1, offset, part).reshape(shape));
    offset += part;
  }
  return at::cat(blocks, 0);
}

// One mixer of the reference: `h` [b, s, hidden] normed -> [b, s, hidden].
inline at::Tensor reference_mixer(std::map<std::string, at::Tensor>& p, const std::string& m,
                                  const triax::mamba2::Mamba2Config& c, const at::Tensor& h) {
  const int64_t b = h.size(0), s = h.size(1), d = c.d_inner(), gn = c.n_groups * c.state_size;
  const int64_t conv_dim = c.conv_dim(), k = c.conv_kernel, n = c.state_size, g = c.group_channels();
  const std::vector<int64_t> projection_parts = {g, g, n, n, c.heads_per_group()}, conv_parts = {g, n, n};
  at::Tensor projected = at::matmul(h, hf_rows(p.at(m + "in_proj.weight"), projection_parts).t());
  if (p.count(m + "in_proj.bias")) projected = projected + hf_rows(p.at(m + "in_proj.bias"), projection_parts);
  const at::Tensor z = projected.narrow(2, 0, d), xbc = projected.narrow(2, d, conv_dim);
  const at::Tensor dt = projected.narrow(2, d + conv_dim, c.num_heads);
  // Causal depthwise convolution: output t reads inputs t - k + 1 .. t (zeros before the start).
  const at::Tensor w = hf_rows(p.at(m + "conv1d.weight"), conv_parts).squeeze(1);  // [conv_dim, k]
  at::Tensor conv = p.count(m + "conv1d.bias") ? hf_rows(p.at(m + "conv1d.bias"), conv_parts).expand({b, s, conv_dim}).clone()
                                               : at::zeros({b, s, conv_dim}, h.options());
  for (int64_t j = 0; j < k; ++j) {
    const int64_t shift = k - 1 - j;
    if (shift < s) conv.narrow(1, shift, s - shift).add_(xbc.narrow(1, 0, s - shift) * w.select(1, j));
  }
  conv = at::silu(conv);
  const at::Tensor x = conv.narrow(2, 0, d).reshape({b, s, c.num_heads, c.head_dim});
  const at::Tensor B = conv.narrow(2, d, gn).reshape({b, s, c.n_groups, c.state_size});
  const at::Tensor C = conv.narrow(2, d + gn, gn).reshape({b, s, c.n_groups, c.state_size});
  const at::Tensor step = at::softplus(dt + p.at(m + "dt_bias")).clamp(c.time_step_limit_low, c.time_step_limit_high);
  at::Tensor y = sequential_ssd(x, step, -at::exp(p.at(m + "A_log")), B, C).first;
  y = (y + p.at(m + "D").unsqueeze(-1) * x).reshape({b, s, d}) * at::silu(z);
  const at::Tensor grouped = y.reshape({b, s, c.n_groups, -1});
  y = (grouped * at::rsqrt(grouped.pow(2).mean(-1, true) + c.layer_norm_epsilon)).reshape({b, s, d});
  at::Tensor out = at::matmul(y * p.at(m + "norm.weight"), p.at(m + "out_proj.weight").t());
  return p.count(m + "out_proj.bias") ? out + p.at(m + "out_proj.bias") : out;
}

// Logits [batch, seq, vocab] of Mamba2ForCausalLM for `ids`, from the model's parameters.
inline at::Tensor reference_logits(Mamba2Model& model, const at::Tensor& ids) {
  std::map<std::string, at::Tensor> p = parameters_of(model);
  const auto& c = model.config();
  const int64_t batch = ids.size(0), seq = ids.size(1);
  at::Tensor x = p.at("backbone.embeddings.weight").index_select(0, ids.reshape({-1})).reshape({batch, seq, -1});
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    const std::string prefix = "backbone.layers." + std::to_string(layer) + ".";
    x = x + reference_mixer(p, prefix + "mixer.", c, rms_norm(x, p.at(prefix + "norm.weight"), c.layer_norm_epsilon));
  }
  x = rms_norm(x, p.at("backbone.norm_f.weight"), c.layer_norm_epsilon);
  const at::Tensor head = p.count("lm_head.weight") ? p.at("lm_head.weight") : p.at("backbone.embeddings.weight");
  return at::matmul(x, head.t());
}

}  // namespace mamba2_test
