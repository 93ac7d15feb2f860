// The pipeline-engine interface plugin authors implement, and ModelRef, through which an
// engine drives the model (a plugin of another library) across the C ABI.
#pragma once

#include <ATen/core/Tensor.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "triax/abi.h"
#include "triax/host.hpp"
#include "triax/model.hpp"

namespace triax {

class ModelRef {
 public:
  explicit ModelRef(triax_model_ref ref) : ref_(ref) {}
  StageOutput forward(const StageInput& input) const;
  const triax_model_ref& c_ref() const { return ref_; }

 private:
  triax_model_ref ref_;
};

struct EngineContext {
  int pp_rank = 0, pp_size = 1;
  int micro_batches = 0;   // per optimizer step; 0 when the host does not say (ABI 1.0)
  YAML::Node parallelism;  // the whole `parallelism` section
  Host host;
  // The host places the engine's chunks as the engine says (ABI 1.13; before: interleaved).
  bool host_places_chunks = false;
  // The host's pipeline sends return at once, completing in the background (ABI 1.15).
  bool host_buffers_sends = false;
  static EngineContext from_c(const triax_engine_context& context);
};

// One optimizer step's worth of work, as the host hands it to the engine: one model chunk per
// pipeline rank, or as many as the engine asked for (see Engine::model_chunks in plugin.hpp).
class StepRequest {
 public:
  explicit StepRequest(const triax_step_request& request);
  // This rank's model chunks, in chunk order; chunk c holds virtual stage c x pp_size + pp_rank.
  const std::vector<ModelRef>& models() const { return models_; }
  int chunk_count() const { return static_cast<int>(models_.size()); }
  const ModelRef& model(int chunk = 0) const { return models_.at(static_cast<size_t>(chunk)); }
  int micro_batches() const { return request_.micro_batches; }
  // Inputs of micro-batch `index` (0-based, in order).
  StageInput micro_batch(int index) const;
  // To call after the backward of micro-batch `index` through chunk `chunk`: the host folds that
  // chunk's gradients (and may start reducing them after the last micro-batch).
  void after_backward(int chunk, int index) const;
  void after_backward(int index) const { after_backward(0, index); }
  // Whether the host records the step's passes (ABI 1.14: parallelism.pp_pass_record), and the
  // record of one pass or transfer that just ended, `seconds` long (PipelineStage times them).
  bool records_passes() const { return pass_timed_ != nullptr; }
  void pass_timed(triax_pass_kind kind, int chunk, int index, double seconds) const;

 private:
  const triax_step_request& request_;
  std::vector<ModelRef> models_;
  bool chunk_hook_ = false;  // the host gave after_chunk_backward (ABI 1.3)
  decltype(triax_step_request::pass_timed) pass_timed_ = nullptr;  // ABI 1.14, NULL: no record
};

struct StepResult {
  at::Tensor loss;      // mean LM loss over micro-batches (last stage)
  at::Tensor aux_loss;  // mean auxiliary loss, or undefined
  int peak_live_micro_batches = 0;
  // Per name (the model's aux_loss_names), the mean over micro-batches of this rank's auxiliary
  // losses; names this rank computes none of are absent.
  std::map<std::string, at::Tensor> aux_losses;
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual StepResult train_step(const StepRequest& request) = 0;
};

}  // namespace triax
