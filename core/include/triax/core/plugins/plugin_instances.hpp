// Host-side owners of plugin instances: each wraps one C handle and its vtable, turns status
// codes back into exceptions (ConfigError for TRIAX_ERROR_INVALID_CONFIG) and destroys the
// instance when it goes away.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
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
  };
  Result train_step(const triax_step_request& request);
  // Model chunks the engine wants per pipeline rank (triax_engine_vtable.model_chunks; 1 without it).
  int model_chunks() const;
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

  void step(const std::vector<at::Tensor>& grads, double learning_rate);
  int64_t state_bytes() const;
  // Whole dp-averaged gradients, or this dp rank's shards of them (ZeRO).
  triax_gradient_sharding gradient_sharding() const;
  const std::string& name() const { return name_; }

  // Whether the plugin lists its state (ABI 1.2); without it checkpoints hold no optimizer state.
  bool exposes_state() const;
  std::vector<OptimizerStateTensor> state() const;
  // Tells the plugin that loaded values were copied into its state tensors.
  void state_loaded();

 private:
  const triax_optimizer_vtable& vtable_;
  std::string name_;
  triax_optimizer* handle_ = nullptr;
};

}  // namespace triax
