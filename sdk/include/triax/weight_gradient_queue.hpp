// The engine's side of deferred weight gradients (ABI 1.13, triax_weight_gradient_queue): the
// products a model deferred during the backward of one micro-batch through one stage, held until
// the schedule runs them (W). PipelineStage keeps one per (chunk, micro-batch) forwarded with
// the backward split; the model's side is triax/layers/deferred_weight_gradients.hpp.
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

#include "triax/abi.h"

namespace triax {

class WeightGradientQueue {
 public:
  WeightGradientQueue();
  // Releases what was never run (a step that failed before its W).
  ~WeightGradientQueue();
  WeightGradientQueue(const WeightGradientQueue&) = delete;
  WeightGradientQueue& operator=(const WeightGradientQueue&) = delete;

  // What a model's forward receives (triax_stage_io.weight_gradients); valid while this lives.
  const triax_weight_gradient_queue* c_queue() const { return &queue_; }

  // Runs every deferred product in the order deferred, releasing each; returns how many ran.
  // Throws the first failure (the products after it are released unrun).
  size_t run();
  size_t size() const;

 private:
  static void defer(void* self, triax_deferred_work work);
  void release_all();

  triax_weight_gradient_queue queue_{};
  mutable std::mutex mutex_;  // autograd may defer from its device threads
  std::vector<triax_deferred_work> work_;
};

}  // namespace triax
