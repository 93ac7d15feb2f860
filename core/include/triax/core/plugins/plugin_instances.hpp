// Host-side owners of plugin instances: each wraps one C handle and its vtable, turns status
// codes back into exceptions (ConfigError for TRIAX_ERROR_INVALID_CONFIG) and destroys the
// instance when it goes away.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "triax/abi.h"
#include "triax/parameter.hpp"

namespace triax {

// Throws the exception matching a plugin's failure status; `who` prefixes the message.
void throw_plugin_failure(triax_status status, const triax_error& error, const std::string& who);

class ModelInstance {
 public:
  // Forward FLOPs per token of each pipeline block, before any instance exists.
  static std::vector<double> describe_blocks(const triax_model_vtable& vtable, const std::string& name,
                                             const std::string& config_yaml, int64_t sequence_length);
  // The vocabulary the data loader draws from: the plugin's answer (ABI 1.3 vocab_size), or the
  // model_config's vocab_size for a plugin without one.
  static int64_t vocab_size(const triax_model_vtable& vtable, const std::string& name, const std::string& config_yaml);
  // The formula behind flops_per_token, as the plugin names it (ABI 1.3 flops_formula).
  static std::string flops_formula(const triax_model_vtable& vtable);

  ModelInstance(const triax_model_vtable& vtable, std::string name, const std::string& config_yaml,
                const triax_model_context& context);
  ~ModelInstance();
  ModelInstance(const ModelInstance&) = delete;
  ModelInstance& operator=(const ModelInstance&) = delete;

  triax_model_ref ref() const { return {&vtable_, handle_}; }
  const std::string& name() const { return name_; }
  const std::vector<NamedParameter>& parameters() const { return parameters_; }
  double flops_per_token(int64_t sequence_length) const;
  int64_t total_parameters() const;
  std::string resolved_config() const;
  void set_training(bool training);
  // The names of the model's auxiliary losses (none before ABI 1.3).
  std::vector<std::string> aux_loss_names() const;
  // QK-clip (ABI 1.12): the plugin's attention layers keep their logits' maxima; refused
  // (TRIAX_ERROR_UNSUPPORTED, naming the plugin) by a plugin without it.
  void track_attention_logits(bool enable);
  // The factors of the parameters holding query or key rows, by this instance's parameter index.
  std::vector<std::pair<int64_t, at::Tensor>> qk_clip_factors(double threshold);

 private:
  const triax_model_vtable& vtable_;
  std::string name_;
  triax_model* handle_ = nullptr;
  std::vector<NamedParameter> parameters_;
};

class EngineInstance {
 public:
  EngineInstance(const triax_engine_vtable& vtable, std::string name, const triax_engine_context& context);
  ~EngineInstance();
  EngineInstance(const EngineInstance&) = delete;
  EngineInstance& operator=(const EngineInstance&) = delete;

  struct Result {
    at::Tensor loss;
    at::Tensor aux_loss;
    int peak_live_micro_batches = 0;
    // Indexed as the model's aux_loss_names; undefined where this rank has none (ABI 1.3).
    std::vector<at::Tensor> aux_losses;
  };
  Result train_step(const triax_step_request& request);
  // Model chunks the engine wants per pipeline rank (triax_engine_vtable.model_chunks; 1 without it).
  int model_chunks() const;
  // Where they sit (triax_engine_vtable.chunk_placement, ABI 1.13; interleaved without it).
  triax_chunk_placement chunk_placement() const;
  const std::string& name() const { return name_; }

 private:
  const triax_engine_vtable& vtable_;
  std::string name_;
  triax_engine* handle_ = nullptr;
};

// One tensor of an optimizer's state (see triax_optimizer_state): live, so saving reads it and
// loading copies into it.
struct OptimizerStateTensor {
  int64_t param_index = 0;
  std::string name;
  at::Tensor tensor;
  int64_t element_offset = 0;
  bool per_parameter = false;
};

class OptimizerInstance {
 public:
  OptimizerInstance(const triax_optimizer_vtable& vtable, std::string name, const triax_optimizer_context& context,
                    const std::vector<triax_optimizer_param>& params);
  ~OptimizerInstance();
  OptimizerInstance(const OptimizerInstance&) = delete;
  OptimizerInstance& operator=(const OptimizerInstance&) = delete;

  // One update with the gradients as they are and the clipping coefficient (0-dim fp32, or
  // undefined for none). A plugin before ABI 1.8 gets fp32 gradients scaled by the host.
  void step(const std::vector<at::Tensor>& grads, double learning_rate, const at::Tensor& grad_scale = {});
  // Whether the plugin takes gradients in the parameters' dtype and applies the scale (ABI 1.8).
  bool takes_scaled_gradients() const;
  int64_t state_bytes() const;
  // Whole dp-averaged gradients, or this dp rank's shards of them (ZeRO).
  triax_gradient_sharding gradient_sharding() const;
  const std::string& name() const { return name_; }

  // Whether the plugin lists its state (ABI 1.2); without it checkpoints hold no optimizer state.
  bool exposes_state() const;
  std::vector<OptimizerStateTensor> state() const;
  // Tells the plugin that loaded values were copied into its state tensors.
  void state_loaded();
  // optimizer_factory with every default filled in (ABI 1.12), or nullopt: the section as given.
  std::optional<std::string> resolved_config() const;
  // QK-clip's threshold on attention logits (ABI 1.12), 0 when off.
  double qk_clip_threshold() const;
  // Each parameter (its index at creation) multiplied by its factor, masters too.
  void scale_parameters(const std::vector<std::pair<int64_t, at::Tensor>>& factors);

 private:
  const triax_optimizer_vtable& vtable_;
  std::string name_;
  triax_optimizer* handle_ = nullptr;
};

}  // namespace triax
