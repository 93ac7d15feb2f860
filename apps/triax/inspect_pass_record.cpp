#include "inspect_pass_record.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "pass_record_reading.hpp"
#include "schedule_simulator.hpp"
#include "shipped_schedules.hpp"
#include "step_simulator.hpp"
#include "triax/chunk_placement.hpp"
#include "triax/error.hpp"

namespace triax::cli {
namespace {

std::string ms(double value) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(3) << value;
  return out.str();
}

// The times the run's zero-bubble engines ordered their passes for (its config's
// parallelism.pp_pass_times), equal without them.
plugins::PassTimes ordering_times(const std::string& run_folder) {
  plugins::PassTimes times;
  try {
    const YAML::Node given = YAML::LoadFile(run_folder + "/config.yaml")["parallelism"]["pp_pass_times"];
    if (given && given.IsSequence() && given.size() == 3)
      times = {given[0].as<double>(), given[1].as<double>(), given[2].as<double>(), 0.0};
  } catch (const YAML::Exception&) {
  }
  return times;
}

// The shipped engine's schedule at the run's shape (its chunks' placement, and the order the
// simulator computes for it), or none for an engine that is not shipped or refuses the shape.
std::optional<plugins::EngineSchedule> shipped_schedule_of(const RecordedRun& run, const std::string& run_folder) {
  try {
    return plugins::shipped_schedule(run.engine, run.pp_size, run.micro_batches, ordering_times(run_folder));
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
}

// Each rank's recorded steps with the peers of its transfers, which its chunks' placement gives.
std::vector<std::vector<plugins::ScheduleStep>> steps_with_peers(const RecordedRun& run,
                                                                 triax_chunk_placement placement) {
  using Kind = plugins::ScheduleStep::Kind;
  std::vector<std::vector<plugins::ScheduleStep>> steps;
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    steps.push_back(run.ranks[r].steps);
    for (plugins::ScheduleStep& step : steps.back()) {
      if (!step.is_send() && !step.is_receive()) continue;
      const bool downstream = step.kind == Kind::SendOutput || step.kind == Kind::ReceiveGradient;
      const int stage = virtual_stage_of(placement, run.pp_size, static_cast<int>(r), step.chunk);
      step.peer = holder_of_virtual_stage(placement, run.pp_size, downstream ? stage + 1 : stage - 1).pp_rank;
    }
  }
  return steps;
}

void print_ranks(const RecordedRun& run) {
  std::cout << "| pp rank | chunk | F | B | W | backward | receives | sends | held | engine | outside | step |\n"
            << "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    const RecordedRank& rank = run.ranks[r];
    for (size_t c = 0; c < rank.chunk_times.size(); ++c) {
      const plugins::ChunkPassTimes& t = rank.chunk_times[c];
      std::cout << "| " << r << " | " << c << " | " << ms(t.forward) << " | " << ms(t.backward_input) << " | "
                << ms(t.backward_weight) << " | " << ms(t.backward) << " | ";
      if (c == 0)
        std::cout << ms(rank.receives) << " | " << ms(rank.sends) << " | " << ms(rank.held) << " | " << ms(rank.engine)
                  << " | " << ms(rank.outside) << " | " << ms(rank.step) << " |\n";
      else
        std::cout << "| | | | | |\n";
    }
  }
}

}  // namespace

void inspect_pass_record(const RecordInspection& inspection) {
  const RecordedRun run = read_pass_record(inspection.run_folder, inspection.skip_steps);
  std::vector<std::vector<plugins::Pass>> order;
  plugins::RankPassTimes times;
  times.transfer = inspection.transfer;
  double outside = run.ranks.front().outside;
  for (const RecordedRank& rank : run.ranks) {
    order.push_back(rank.order);
    times.by_rank.push_back(rank.chunk_times);
    outside = std::min(outside, rank.outside);
  }
  const std::optional<plugins::EngineSchedule> shipped = shipped_schedule_of(run, inspection.run_folder);
  const bool shipped_order = shipped && shipped->shape.chunks == run.chunks && shipped->passes == order;
  const plugins::ScheduleShape shape{run.pp_size, run.chunks, run.micro_batches};
  const triax_chunk_placement placement = shipped ? shipped->placement : TRIAX_CHUNKS_INTERLEAVED;
  const plugins::SimulatedStep simulated = plugins::simulate_schedule(shape, placement, order, times);
  // The same times with the transfers where the run's engine placed them: a send placed after
  // later passes holds its receiver back, which the line above, every tensor sent as made, leaves out.
  const double as_placed = plugins::simulate_steps(steps_with_peers(run, placement), times).step_time;
  std::cout << "record: " << run.engine << ", pp " << run.pp_size << ", " << run.micro_batches << " micro-batches, "
            << run.chunks << " chunk(s) per rank, steps " << run.steps.front() << "-" << run.steps.back() << "; order "
            << (shipped_order ? "as the simulator's schedule of " + run.engine : "as recorded (not the simulator's)")
            << "\nper rank, ms: F, B, W, backward (whole) the mean pass per micro-batch; the rest medians per step "
               "(held: the tensors' waits on their sender between the pass that made them and their send)\n\n";
  print_ranks(run);
  const double pipeline = simulated.step_time, step = pipeline + outside;
  const double measured_pipeline = run.slowest_engine, measured_step = run.slowest_step;
  std::cout << "\nsimulated from these times: bubble " << std::fixed << std::setprecision(1)
            << 100.0 * simulated.bubble_fraction << "%; outside the engine: " << ms(outside)
            << " ms, the least of any rank\n"
            << "pipeline (ms): predicted " << ms(pipeline) << ", measured " << ms(measured_pipeline) << ", ratio "
            << ms(measured_pipeline / pipeline) << "\n"
            << "step (ms): predicted " << ms(step) << ", measured " << ms(measured_step) << ", ratio "
            << ms(measured_step / step) << "\n"
            << "pipeline with the transfers where the run placed them (ms): predicted " << ms(as_placed) << ", ratio "
            << ms(measured_pipeline / as_placed) << "\n";
}

}  // namespace triax::cli
