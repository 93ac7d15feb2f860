#include "decode_profiler.hpp"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <set>

#include "triax/report/log.hpp"

namespace triax::generation {
namespace {

namespace kineto = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;

torch::profiler::impl::ProfilerConfig trace_config() {
  return torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::KINETO, /*report_input_shapes=*/true,
                                               /*profile_memory=*/false, /*with_stack=*/false);
}

}  // namespace

DecodeProfiler::DecodeProfiler(std::string path, const c10::Device& device, int64_t steps)
    : path_(std::move(path)), cuda_(device.is_cuda()), steps_(steps) {}

DecodeProfiler::~DecodeProfiler() {
  if (recording_) kineto::disableProfiler();  // generation failed mid-trace: leave nothing enabled
}

void DecodeProfiler::before_step(int64_t index) {
  if (path_.empty() || recording_ || index != kSkippedSteps) return;
  std::set<ActivityType> activities{ActivityType::CPU};
  if (cuda_) activities.insert(ActivityType::CUDA);
  kineto::prepareProfiler(trace_config(), activities);
  kineto::enableProfiler(trace_config(), activities);
  recording_ = true;
}

void DecodeProfiler::after_step(int64_t) {
  if (!recording_) return;
  if (++recorded_ == steps_) save();
}

void DecodeProfiler::finish() {
  if (recording_) save();
}

void DecodeProfiler::save() {
  recording_ = false;
  std::unique_ptr<kineto::ProfilerResult> result = kineto::disableProfiler();
  result->save(path_);
  log::info("--profile: decoding steps " + std::to_string(kSkippedSteps) + "-" +
            std::to_string(kSkippedSteps + recorded_ - 1) + " (" + std::to_string(recorded_) +
            " steps) traced into " + path_);
}

}  // namespace triax::generation
