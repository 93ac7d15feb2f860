// The layer kinds of a Nemotron-H pattern (hybrid_override_pattern), one row per letter: what the
// layer's mixer is, its Hugging Face tensors, its cost, its parameter count and initialisation,
// and what it refuses of the topology. Every letter of Hugging Face's NemotronH has a row; a new
// kind is one more row.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nemotron_h_config.hpp"
#include "triax/causal_lm.hpp"
#include "triax/hf_mapping.hpp"
#include "triax/model.hpp"
#include "triax/parameter.hpp"

namespace triax::nemotron_h {

// One layer's mixer: the module (registered as the layer's "mixer") and how it runs.
struct LayerMixer {
  std::shared_ptr<torch::nn::Module> module;
  // [b, s, hidden] ([b, s/tp, hidden] in REDUCE_SCATTER mode) -> the same shape.
  std::function<at::Tensor(const at::Tensor&)> forward;
  std::function<std::unique_ptr<LayerCache>(int64_t capacity)> create_cache;
  std::function<at::Tensor(const at::Tensor&, const CachedStep&)> forward_cached;
};

// How the model initialises: Hugging Face's initializer_range and rescale_prenorm_residual.
struct LayerInit {
  double initializer_range;
  double out_proj_scale;  // the Mamba-2 mixers' out_proj.weight factor
  uint64_t seed;
};

struct LayerKind {
  char letter = 0;
  std::function<LayerMixer(const NemotronHConfig&, const ModelContext&)> make;
  // Appends the rules of the mixer whose parameters are named `prefix` + name.
  std::function<void(const NemotronHConfig&, std::vector<HfTensorRule>&, const std::string& prefix)> add_hf_rules;
  std::function<double(const NemotronHConfig&, int64_t sequence_length)> multiply_adds_per_token;
  std::function<int64_t(const NemotronHConfig&)> parameter_count;
  // Initialises a parameter of this kind's mixer (false: not one of its names).
  std::function<bool(const NamedParameter&, const NemotronHConfig&, const LayerInit&)> init_parameter;
  // Refuses, naming the key of `reader`, a tensor- or expert-parallel size the mixer cannot split.
  std::function<void(ConfigReader& reader, const NemotronHConfig&, const ModelContext&)> check_tensor_parallel;
};

// The kind of each letter of the pattern (every letter has one: the reader checked).
const LayerKind& layer_kind(char letter);

}  // namespace triax::nemotron_h
