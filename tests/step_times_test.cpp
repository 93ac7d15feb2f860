// Step times cover their own step's work (triax/core/step/device_mark.hpp): a mark's time is when
// the work before it ended, however late the host reads it; and in a whole run every step, the
// last one (read at once) as the others (each read inside the next step), lasts at least as long
// as its injected delays. The old measurement, the host's clock when a step's values were read,
// gave the last step only the part of it after the step before was read: on a GPU about half.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "scoped_fault.hpp"
#include "triax/core/step/device_mark.hpp"
#include "training_test_support.hpp"
#include "triax/faults/fault_injection.hpp"

namespace triax {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

TEST(DeviceMark, TimesTheWorkBetweenTwoMarksNotTheirReading) {
  const c10::Device cpu(c10::kCPU);
  const DeviceMark start = DeviceMark::record(cpu);
  std::this_thread::sleep_for(milliseconds(40));  // the "work"
  const DeviceMark end = DeviceMark::record(cpu);
  std::this_thread::sleep_for(milliseconds(200));  // the host reads late
  const double seconds = end.seconds_since(start);
  EXPECT_GE(seconds, 0.04);
  EXPECT_LT(seconds, 0.2);
}

// On a GPU the marks are timing events: the time is the device's even when the host waits a
// long while before reading it.
TEST(DeviceMarkCuda, TimesTheDevicesWorkNotTheHostsWait) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  const c10::Device gpu(c10::kCUDA, 0);
  at::Tensor x = at::randn({2048, 2048}, at::TensorOptions().device(gpu));
  (void)x.sum().item<float>();  // an idle GPU
  const DeviceMark start = DeviceMark::record(gpu);
  for (int i = 0; i < 20; ++i) x = at::mm(x, x).div_(2048.0);
  const DeviceMark end = DeviceMark::record(gpu);
  end.wait();
  std::this_thread::sleep_for(milliseconds(500));  // the host reads late
  const double seconds = end.seconds_since(start);
  EXPECT_GT(seconds, 0.0);
  EXPECT_LT(seconds, 0.4);
}

// The "step_s" of each line of a run's metrics.jsonl, in step order.
std::vector<double> step_seconds(const fs::path& metrics_file) {
  std::ifstream metrics(metrics_file);
  std::vector<double> out;
  for (std::string line; std::getline(metrics, line);) {
    const size_t at = line.find("\"step_s\": ");
    if (at == std::string::npos) {
      ADD_FAILURE() << "no step_s in " << line;
      continue;
    }
    out.push_back(std::stod(line.substr(at + 10)));
  }
  return out;
}

// Every micro-batch's forward made 100 ms longer (TRIAX_FAULT=slow_forward) gives each step a
// least length that load can only lengthen: a step logged as shorter measured part of its work.
// On CPU the old measurement read each step after the next step's forward and backward, and the
// last one at once: the last step's time held its optimizer step only, without the delays.
TEST(Training, EveryStepTimeCoversItsOwnWork) {
  const fs::path dir = testing::temp_run_dir("step_times");
  const int steps = 6, micro_batches = 2;
  {
    const testing::ScopedFault slow("slow_forward");
    testing::run(testing::tiny_config(dir, steps, 8, micro_batches));  // every step logged
  }
  const std::vector<double> seconds = step_seconds(dir / "metrics.jsonl");
  ASSERT_EQ(seconds.size(), static_cast<size_t>(steps));
  const double least = micro_batches * std::chrono::duration<double>(fault::kSlowForwardDelay).count();
  for (int step = 1; step <= steps; ++step)
    EXPECT_GE(seconds[static_cast<size_t>(step - 1)], least)
        << "step " << step << " took " << seconds[static_cast<size_t>(step - 1)] << " s, its forwards alone " << least
        << " s";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace triax
