#include "triax/report/step_profiler.hpp"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "triax/error.hpp"
#include "triax/report/log.hpp"

namespace triax {
namespace {

namespace fs = std::filesystem;
namespace kineto = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;

torch::profiler::impl::ProfilerConfig kineto_config(const ProfilerOptions& c) {
  return torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::KINETO, c.record_shapes,
                                               c.profile_memory, c.with_stack);
}

}  // namespace

StepProfiler::StepProfiler(const std::optional<ProfilerOptions>& options, int rank, bool cuda)
    : options_(options), rank_(rank), cuda_(cuda) {
  if (!options_) return;
  const std::string& key = options_->key;
  const fs::path folder = options_->export_path;
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw ConfigError(key + ": cannot create the folder '" + folder.string() + "': " + ec.message());
  // Try a write now, so that an unwritable folder stops the run before any step, not after.
  const fs::path probe = folder / (".write_test_rank" + std::to_string(rank));
  std::ofstream(probe) << "ok";
  if (!fs::exists(probe, ec))
    throw ConfigError(key + ": cannot write into '" + folder.string() + "' (is it writable?)");
  fs::remove(probe, ec);
}

StepProfiler::~StepProfiler() {
  if (prepared_ || recording_) {
    try {
      kineto::disableProfiler();  // a run that failed mid-trace: leave nothing enabled
    } catch (...) {
    }
  }
}

std::string StepProfiler::describe() const {
  if (!options_) return "";
  const ProfilerOptions& c = *options_;
  return "profiler: after " + std::to_string(c.skip_first) + " steps, " +
         (c.repeat ? std::to_string(c.repeat) : std::string("unlimited")) + " cycle(s) of " + std::to_string(c.wait) +
         " off, " + std::to_string(c.warmup) + " warm-up, " + std::to_string(c.active) +
         " recorded step(s); Chrome traces into " + c.export_path;
}

StepProfiler::Phase StepProfiler::phase_of(int64_t index) const {
  const ProfilerOptions& c = *options_;
  if (index < c.skip_first) return Phase::off;
  const int64_t cycle_length = c.wait + c.warmup + c.active;
  const int64_t within = index - c.skip_first;
  if (c.repeat > 0 && within / cycle_length >= c.repeat) return Phase::off;
  const int64_t position = within % cycle_length;
  if (position < c.wait) return Phase::off;
  return position < c.wait + c.warmup ? Phase::warmup : Phase::active;
}

void StepProfiler::before_step(int64_t step) {
  if (!options_) return;
  std::set<ActivityType> activities{ActivityType::CPU};
  if (cuda_) activities.insert(ActivityType::CUDA);
  const Phase phase = phase_of(index_);
  if (phase == Phase::warmup && !prepared_ && !recording_) {
    kineto::prepareProfiler(kineto_config(*options_), activities);
    prepared_ = true;
  } else if (phase == Phase::active && !recording_) {
    if (!prepared_) kineto::prepareProfiler(kineto_config(*options_), activities);
    kineto::enableProfiler(kineto_config(*options_), activities);
    prepared_ = false;
    recording_ = true;
    first_recorded_step_ = step;
  }
}

void StepProfiler::after_step(int64_t step) {
  if (!options_) return;
  ++index_;
  last_step_ = step;
  if (recording_ && phase_of(index_) != Phase::active) save(step);
  if (recording_ && (index_ - options_->skip_first) % (options_->wait + options_->warmup + options_->active) == 0)
    save(step);  // back-to-back cycles (wait and warm-up 0): one trace per cycle all the same
}

void StepProfiler::finish() {
  if (recording_) save(last_step_);
}

void StepProfiler::save(int64_t last_step) {
  recording_ = false;
  std::unique_ptr<kineto::ProfilerResult> result = kineto::disableProfiler();
  const fs::path path = fs::path(options_->export_path) /
                        ("rank" + std::to_string(rank_) + "_steps" + std::to_string(first_recorded_step_) + "-" +
                         std::to_string(last_step) + ".pt.trace.json");
  try {
    result->save(path.string());
    log::info("profiler: steps " + std::to_string(first_recorded_step_) + "-" + std::to_string(last_step) +
              " traced into " + path.string());
  } catch (const std::exception& e) {
    // The training goes on: a lost trace is not worth a lost run.
    log::warning("profiler: could not write " + path.string() + ": " + e.what());
  }
}

}  // namespace triax
