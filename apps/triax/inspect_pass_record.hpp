// `triax inspect schedule --record RUN_FOLDER`: the schedule simulator fed with the pass times a
// run measured on each of its ranks (parallelism.pp_pass_record): each rank's mean F, B and W per
// model chunk, in the order the run's engine ran them, predict the pipeline's part of the step;
// with the least time any rank spent outside it (the gradients' reduction and norm, the optimizer),
// the step. Printed beside what the run measured.
#pragma once

#include <string>

namespace triax::cli {

struct RecordInspection {
  std::string run_folder;
  int skip_steps = 2;     // the record's first steps left out (warm-up)
  double transfer = 0.0;  // ms per transfer between ranks, for the simulator
};

// Prints the comparison; ConfigError for a missing or malformed record.
void inspect_pass_record(const RecordInspection& inspection);

}  // namespace triax::cli
