// `triax inspect schedule`: the pipeline schedule simulator (docs/pipeline-schedules.md). From the
// times of one micro-batch's forward (F), input backward (B) and weight backward (W) through one
// pipeline stage, given or measured, each shipped engine's step time, bubble (the share of the
// step a rank idles, averaged over ranks) and peak of activations in flight, for every pp and
// micro-batch count asked, from the engines' own schedules (plugins/engines/schedules); or, from
// the times a run's ranks recorded, that run's step (inspect_pass_record.hpp).
#include <algorithm>
#include <boost/program_options.hpp>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "commands.hpp"
#include "inspect_pass_record.hpp"
#include "parsed_options.hpp"
#include "schedule_simulator.hpp"
#include "shipped_schedules.hpp"
#include "stage_timing.hpp"
#include "triax/error.hpp"

namespace triax::cli {
namespace po = boost::program_options;

namespace {

struct ScheduleInspection {
  std::vector<int> pp, micro_batches;
  std::vector<std::string> engines;  // empty: every shipped one
  plugins::PassTimes times;
  std::string unit = "units";
  StageTimingRequest measure;  // with a config: measure the times first
  RecordInspection record;     // with a run folder: the times its ranks recorded
};

po::options_description schedule_option_table(ScheduleInspection& s) {
  po::options_description options("triax inspect schedule options");
  options.add_options()("help,h", "show this help")("pp", po::value<std::vector<int>>(&s.pp)->multitoken(),
                                                    "pipeline ranks (several: one table row each; 4 8)")(
      "micro-batches", po::value<std::vector<int>>(&s.micro_batches)->multitoken(),
      "micro-batches per step (several allowed; 8 16 32)")(
      "engine", po::value<std::vector<std::string>>(&s.engines)->multitoken(),
      "engines to simulate (afab 1f1b interleaved_1f1b zb_h1 zb_v; all by default)")(
      "forward", po::value<double>(&s.times.forward), "F: one micro-batch's forward through one stage")(
      "backward-input", po::value<double>(&s.times.backward_input), "B: its backward to the stage's input")(
      "backward-weight", po::value<double>(&s.times.backward_weight), "W: its weights' gradients")(
      "transfer", po::value<double>(&s.times.transfer), "one activation or gradient between ranks (0)")(
      "measure", po::value<std::string>(&s.measure.config),
      "measure F, B and W (ms) of one stage of this training config's model first (one process, no mpirun)")(
      "set", po::value<std::vector<std::string>>(&s.measure.sets)->composing(), "KEY=VALUE: override the config")(
      "stage-layers", po::value<int>(&s.measure.stage_layers), "with --measure: the stage's layers (layers / pp)")(
      "repeat", po::value<int>(&s.measure.repeat)->default_value(5), "with --measure: timed runs")(
      "plugin-path", po::value<std::vector<std::string>>(&s.measure.plugin_paths)->composing(),
      "with --measure: another folder of plugins")(
      "record", po::value<std::string>(&s.record.run_folder),
      "predict the step of a run from the pass times its ranks recorded (parallelism.pp_pass_record) in this run "
      "folder, beside what it measured")(
      "skip-steps", po::value<int>(&s.record.skip_steps)->default_value(2), "with --record: the first steps left out");
  return options;
}

Parsed<ScheduleInspection> parse_schedule_options(const std::vector<std::string>& args) {
  ScheduleInspection inspection;
  const po::options_description options = schedule_option_table(inspection);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(options).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "triax inspect schedule: " << e.what() << "\n" << options;
    return Parsed<ScheduleInspection>::leave(kExitInvalidConfig);
  }
  if (vm.count("help")) {
    std::cout << options;
    return Parsed<ScheduleInspection>::leave(kExitOk);
  }
  if (inspection.pp.empty()) inspection.pp = {4, 8};
  if (inspection.micro_batches.empty()) inspection.micro_batches = {8, 16, 32};
  const std::vector<std::string> shipped = plugins::shipped_schedule_names();
  for (const std::string& engine : inspection.engines)
    if (std::find(shipped.begin(), shipped.end(), engine) == shipped.end()) {
      std::cerr << "triax inspect schedule: --engine " << engine
                << ": not a shipped engine (afab, 1f1b, interleaved_1f1b, zb_h1, zb_v)\n";
      return Parsed<ScheduleInspection>::leave(kExitInvalidConfig);
    }
  if (inspection.engines.empty()) inspection.engines = shipped;
  inspection.measure.pp = inspection.pp.front();
  return inspection;
}

std::string fixed(double value, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

// One row of the table: the engine's step at (pp, micro_batches), or why it refuses the shape.
std::string table_row(const ScheduleInspection& s, const std::string& engine, int pp, int micro_batches) {
  const std::string head = "| " + engine + " | " + std::to_string(pp) + " | " + std::to_string(micro_batches) + " | ";
  try {
    const plugins::EngineSchedule schedule = plugins::shipped_schedule(engine, pp, micro_batches, s.times);
    const plugins::SimulatedStep step =
        plugins::simulate_schedule(schedule.shape, schedule.placement, schedule.passes, s.times);
    const int peak = *std::max_element(step.peak_in_flight.begin(), step.peak_in_flight.end());
    return head + fixed(step.step_time, 2) + " | " + fixed(100.0 * step.bubble_fraction, 1) + "% | " +
           fixed(static_cast<double>(peak) / schedule.shape.chunks, 1) + " |";
  } catch (const std::invalid_argument& e) {
    return head + "refused: " + e.what() + " | | |";
  }
}

int inspect_schedule(ScheduleInspection s) {
  try {
    if (!s.record.run_folder.empty()) {
      s.record.transfer = s.times.transfer;
      inspect_pass_record(s.record);
      return kExitOk;
    }
    if (!s.measure.config.empty()) {
      const StageTimes measured = measure_stage_times(s.measure);
      // As printed, and as parallelism.pp_pass_times takes them: the orders depend on the digits.
      s.times.forward = std::stod(fixed(measured.forward, 3));
      s.times.backward_input = std::stod(fixed(measured.backward_input, 3));
      s.times.backward_weight = std::stod(fixed(measured.backward_weight, 3));
      s.unit = "ms";
      std::cout << "measured: " << measured.description << "\n"
                << "B + W " << fixed(measured.backward_input + measured.backward_weight, 3)
                << " ms; the backward unsplit " << fixed(measured.whole_backward, 3) << " ms\n"
                << "zb_h1 and zb_v order their passes for these times with --set parallelism.pp_pass_times=["
                << fixed(s.times.forward, 3) << "," << fixed(s.times.backward_input, 3) << ","
                << fixed(s.times.backward_weight, 3) << "]; the table below assumes it\n";
    }
    std::cout << "one stage, one micro-batch: F " << fixed(s.times.forward, 3) << ", B "
              << fixed(s.times.backward_input, 3) << ", W " << fixed(s.times.backward_weight, 3) << ", transfer "
              << fixed(s.times.transfer, 3) << " " << s.unit << "\n"
              << "peak in flight: micro-batches' worth of a rank's activations held at once (the most over ranks)\n\n"
              << "| engine | pp | micro-batches | step (" << s.unit << ") | bubble | peak in flight |\n"
              << "|---|---|---|---|---|---|\n";
    for (int pp : s.pp)
      for (int micro_batches : s.micro_batches)
        for (const std::string& engine : s.engines) std::cout << table_row(s, engine, pp, micro_batches) << "\n";
    return kExitOk;
  } catch (const ConfigError& e) {
    std::cerr << "triax inspect schedule: " << e.what() << "\n";
    return kExitInvalidConfig;
  } catch (const std::exception& e) {
    std::cerr << "triax inspect schedule: " << e.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace

int inspect_schedule_command(const std::vector<std::string>& args) {
  return run_parsed(parse_schedule_options(args), inspect_schedule);
}

}  // namespace triax::cli
