// The times of one pipeline stage's passes, measured for `triax inspect schedule --measure`: a
// training config's model is built in this process as one stage in the middle of a pipeline (no
// embedding, no loss: the layers of one stage) with its own device, dtype, micro-batch, recompute
// and fp8 settings, and one micro-batch goes forward (F), back to the stage's input (B) and
// through the deferred weight products (W), the device waited for after each. The model's first
// block (the embedding) makes the stage's input, so its boundary is the one training sends. The
// backward unsplit is timed too, to show what the split costs.
#pragma once

#include <string>
#include <vector>

namespace triax::cli {

struct StageTimingRequest {
  std::string config;                     // a training config file
  std::vector<std::string> sets;          // KEY=VALUE overrides, as `triax train --set`
  std::vector<std::string> plugin_paths;  // after the config's plugins.paths
  int pp = 4;                             // the stage holds the model's layers / pp
  int stage_layers = 0;                   // or this many layers, when above 0
  int repeat = 5;                         // timed runs, after two untimed ones
};

struct StageTimes {
  double forward = 0.0, backward_input = 0.0, backward_weight = 0.0;  // milliseconds, medians
  double whole_backward = 0.0;  // the backward unsplit (every gradient in one pass), for comparison
  std::string description;                                            // what was measured, for the output
};

StageTimes measure_stage_times(const StageTimingRequest& request);

}  // namespace triax::cli
