// The record of pipeline passes (parallelism.pp_pass_record, docs/pipeline-runs.md): where
// each rank writes it and what its "timeline" entries are called. The trainer writes it
// (triax/report/pass_record.hpp); `triax inspect schedule --record` reads it.
#pragma once

#include <array>
#include <string>

#include "triax/abi.h"

namespace triax {

// A triax_pass_kind's name in the record, indexed by the kind.
inline constexpr std::array<const char*, 8> kPassKindNames = {"forward",          "backward",      "backward_input",
                                                              "backward_weight",  "receive_input", "send_output",
                                                              "receive_gradient", "send_gradient"};

// World rank `rank`'s file of the record in `run_folder` (checkpoints.checkpoints_path).
inline std::string pass_record_path(const std::string& run_folder, int rank) {
  return run_folder + "/pass_record/rank" + std::to_string(rank) + ".jsonl";
}

}  // namespace triax
