// Muon's settings, read strictly from `optimizer.optimizer_factory` (name: muon) beside AdamW's
// keys, which the parameters that do not take Muon use.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "adamw_update.hpp"
#include "newton_schulz.hpp"
#include "triax/config_reader.hpp"

namespace triax::plugins {

// The Muon update's own hyper-parameters.
struct MuonOptions {
  double momentum = 0.95;
  bool nesterov = true;
  int64_t ns_steps = 5;
  NewtonSchulzCoefficients coefficients{"quintic", 3.4445, -4.7750, 2.0315};
  // The RMS of an update: the orthogonalised A x B matrix (RMS 1/sqrt(max(A, B))) is scaled by
  // update_rms * sqrt(max(A, B)), Moonlight's match of AdamW's typical update RMS.
  double update_rms = 0.2;
};

struct MuonSettings {
  AdamWSettings adamw;  // adam_beta1, adam_beta2, adam_eps, torch_adam_is_fused
  MuonOptions update;
  // MuonClip: attention logits above it have their query and key rows scaled down; unset: off.
  std::optional<double> qk_clip_threshold;
  // Regular expressions (matched from the name's start, as weight_decay_exclude_named_params):
  // parameters that must take Muon, and matrices that take AdamW instead.
  std::vector<std::string> muon_named_params;
  std::vector<std::string> adamw_named_params;
  // The most elements of one matrix that one rank orthogonalises.
  int64_t max_matrix_elements = int64_t{1} << 28;

  // From the `optimizer` section: an unknown key or a value out of range is a ConfigError naming it.
  static MuonSettings read(const YAML::Node& optimizer_section);

  // Throws a ConfigError naming `key` of optimizer_factory (the file and its line when known).
  [[noreturn]] void fail(const std::string& key, const std::string& what) const { factory_->fail(key, what); }
  // The factory with every default filled in, as YAML.
  std::string resolved_yaml() const;

 private:
  std::optional<ConfigReader> factory_;
};

// The default of adamw_named_params: embeddings, the output head, the MoE router, biases, and
// Mamba's convolution and state-decay tensors (matrix-shaped, but no linear maps of the residual
// stream).
const std::vector<std::string>& default_adamw_named_params();

}  // namespace triax::plugins
