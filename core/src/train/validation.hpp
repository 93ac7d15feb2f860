// Validation during training: every tokens.val_check_interval steps and after the last step,
// tokens.limit_val_batches micro-batches of the current data stage's held-out data on each
// data-parallel replica go forward through the pipeline without gradients, at the run's
// topology. The loss is the mean LM cross-entropy over the counted tokens of all of them, every
// micro-batch weighted by its counted tokens, as one rank evaluating them all would weigh them.
//
// The model is left as it was: the chunks are switched to evaluation mode and back (no dropout,
// no MoE routing statistics), no gradient is kept, the optimizer does not step, and no random
// generator is drawn from. The host runs the pass through the SDK's evaluate_pipeline, the same
// for every engine plugin and every ABI version it was built for.
#pragma once

#include <cstdint>
#include <string>

#include "triax/engine.hpp"
#include "triax/report/metrics.hpp"

namespace triax {

struct TrainerState;

class Validation {
 public:
  explicit Validation(TrainerState& state);

  bool enabled() const { return interval_ > 0; }
  // Whether the run validates after `step`: every interval, and after the last step.
  bool due(int64_t step) const;
  // Evaluates after `step` (collective over the world: every rank calls it at the same step).
  ValidationMetrics evaluate(int64_t step);
  // For the start of the log.
  std::string describe() const;

 private:
  TrainerState& s_;
  int64_t interval_;
  int64_t micro_batches_;   // per replica
  EngineContext pipeline_;  // where this rank sits in the pipeline
};

}  // namespace triax
