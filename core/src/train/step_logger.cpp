#include "train/step_logger.hpp"

#ifdef TRIAX_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <algorithm>

#include "step/step_losses.hpp"
#include "train/nonfinite_guard.hpp"
#include "triax/report/run_reporter.hpp"

namespace triax {
namespace {

// Peak memory of the step's device since the last call: the CUDA caching allocator's peak of
// allocated bytes, whose peak is then reset (the first call's covers the run's start), or the
// process's peak resident memory on CPU (never reset: since the start).
int64_t peak_memory_bytes_since_last_call([[maybe_unused]] const c10::Device& device) {
#ifdef TRIAX_WITH_CUDA
  if (device.is_cuda()) {
    const int64_t peak = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index())
                             .allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
                             .peak;
    c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
    return peak;
  }
#endif
  return peak_resident_bytes();
}

}  // namespace

StepLogger::StepLogger(StepRates rates, c10::Device device, RunReporter& reporter, NonFiniteGuard& nonfinite,
                       const StepLosses& losses, int64_t first_step)
    : rates_(std::move(rates)),
      device_(device),
      reporter_(reporter),
      nonfinite_(nonfinite),
      losses_(losses),
      read_back_(device),
      start_(Clock::now()),
      interval_start_(DeviceMark::record(device)),
      interval_first_(first_step) {}

void StepLogger::queue(StepMetrics known, const at::Tensor& values) {
  flush();
  queued_ = std::move(known);
  read_back_.queue(queued_.step, values);
}

void StepLogger::flush() {
  if (!read_back_.pending()) return;
  StepReadBack::Values values = read_back_.take();
  StepMetrics m = std::move(queued_);
  m.loss = StepLosses::loss(values.host);
  m.aux_losses = losses_.aux_losses(values.host);
  m.grad_norm = values.host[-1].item<double>();
  m.step_seconds = values.done.seconds_since(interval_start_) / static_cast<double>(m.step - interval_first_);
  m.tokens_per_second = static_cast<double>(rates_.tokens_per_step) / m.step_seconds;
  m.tokens_per_second_per_device = m.tokens_per_second / static_cast<double>(rates_.world_size);
  m.model_tflops_per_device = rates_.flops_per_token * m.tokens_per_second_per_device / 1e12;
  if (rates_.peak.tflops) m.mfu = m.model_tflops_per_device / *rates_.peak.tflops;
  m.interval_peak_memory_bytes = peak_memory_bytes_since_last_call(device_);
  run_peak_memory_bytes_ = std::max(run_peak_memory_bytes_, m.interval_peak_memory_bytes);
  m.peak_memory_bytes = run_peak_memory_bytes_;
  m.elapsed_seconds = elapsed_seconds();
  m.eta_seconds = m.step_seconds * static_cast<double>(rates_.total_steps - m.step);
  reporter_.logged(m);
  nonfinite_.check(m.step, m.loss, m.grad_norm);
  interval_start_ = std::move(values.done);
  interval_first_ = m.step;
}

void StepLogger::step_done(int64_t step) {
  reporter_.step_done(step, rates_.total_steps,
                      std::chrono::duration<double>(Clock::now() - interval_start_.queued_at()).count() /
                          static_cast<double>(step - interval_first_));
}

void StepLogger::restart_interval(int64_t step) {
  interval_start_ = DeviceMark::record(device_);
  interval_first_ = step;
}

double StepLogger::elapsed_seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

}  // namespace triax
