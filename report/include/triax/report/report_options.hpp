// The one place where the run's outputs (triax_report) get their options from the config: each
// output reads a small struct, never the TrainConfig.
#pragma once

#include <cstdint>
#include <optional>

#include "triax/config/train_config.hpp"
#include "triax/report/run_reporter.hpp"
#include "triax/report/step_profiler.hpp"

namespace triax {

// `logging_rank`: whether this rank writes the outputs; `resumed_at`: the step a resumed run starts after.
RunReporterOptions run_reporter_options(const TrainConfig& config, bool logging_rank, int64_t resumed_at);

// Empty without a profiler section.
std::optional<ProfilerOptions> profiler_options(const TrainConfig& config);

}  // namespace triax
