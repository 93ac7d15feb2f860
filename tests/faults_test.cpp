// Numerical faults in one process, injected with TRIAX_FAULT (docs/reliability.md): the skip
// policy leaves parameters and optimizer state bit for bit as they were and counts the step; too
// many skips in a row and the stop policy end the run naming the last good checkpoint, which
// never holds a diverged model; a misspelt fault point is refused by name.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "scoped_fault.hpp"
#include "test_plugin_registry.hpp"
#include "triax/core/checkpoint/checkpoint_folder.hpp"
#include "triax/interop/hdf5_file.hpp"
#include "triax/core/comm/communicator.hpp"
#include "triax/config/train_config.hpp"
#include "triax/core/trainer.hpp"

namespace triax {
namespace {

namespace fs = std::filesystem;
using interop::Hdf5File;
using checkpoint::step_folder_name;

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("triax_faults_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

using testing::ScopedFault;

// The parity matrix's tiny Llama, one rank, into `dir`.
TrainSummary train(const fs::path& dir, std::vector<std::string> overrides) {
  overrides.push_back("checkpoints.checkpoints_path=" + dir.string());
  overrides.push_back("tokens.batch_accumulation_per_replica=2");
  TrainConfig config = load_train_config(TRIAX_PARITY_CONFIG, overrides);
  SingleProcessCommunicator comm;
  Trainer trainer(std::move(config), testing::test_plugin_registry(), comm);
  return trainer.train();
}

// Every dataset under `group` of two rank files, equal bit for bit.
void expect_same_datasets(const Hdf5File& a, const Hdf5File& b, const std::string& group, int& compared) {
  for (const std::string& child : a.children(group)) {
    const std::string object = group + "/" + child;
    if (a.has_attribute(object, "dtype")) {  // a dataset (groups have no dtype)
      EXPECT_TRUE(at::equal(a.read_tensor(object), b.read_tensor(object))) << object;
      ++compared;
    } else {
      expect_same_datasets(a, b, object, compared);
    }
  }
}

TEST(NonFinitePolicy, SkipLeavesParametersAndOptimizerStateBitForBit) {
  const fs::path dir = fresh_dir("skip");
  const ScopedFault fault("nan_grad:*:3");
  const TrainSummary summary =
      train(dir, {"tokens.train_steps=4", "checkpoints.checkpoint_interval=1", "general.nonfinite_policy=skip"});
  ASSERT_EQ(summary.losses.size(), 4u);
  EXPECT_EQ(summary.skipped_steps, 1);
  EXPECT_TRUE(std::isnan(summary.grad_norms[2]));
  EXPECT_TRUE(std::isfinite(summary.losses[3]) && std::isfinite(summary.grad_norms[3]));
  // The checkpoints after step 2 and after the skipped step 3 hold the same model and state.
  const Hdf5File before = Hdf5File::open_read((dir / step_folder_name(2) / "rank_00000.h5").string());
  const Hdf5File after = Hdf5File::open_read((dir / step_folder_name(3) / "rank_00000.h5").string());
  int compared = 0;
  expect_same_datasets(before, after, "/model", compared);
  expect_same_datasets(before, after, "/optimizer", compared);
  EXPECT_GT(compared, 20);
  // ... while the step after it changes them again.
  const Hdf5File next = Hdf5File::open_read((dir / step_folder_name(4) / "rank_00000.h5").string());
  EXPECT_FALSE(at::equal(after.read_tensor("/model/model.norm.weight"), next.read_tensor("/model/model.norm.weight")));
  // Counted in the metrics.
  std::ifstream metrics(dir / "metrics.jsonl");
  std::vector<std::string> lines;
  for (std::string line; std::getline(metrics, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NE(lines[1].find("\"skipped_steps\": 0"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("\"skipped_steps\": 1"), std::string::npos) << lines[2];
  fs::remove_all(dir);
}

TEST(NonFinitePolicy, TooManySkipsInARowStopNamingTheLastGoodCheckpoint) {
  const fs::path dir = fresh_dir("skips");
  const ScopedFault fault("nan_loss:*:3-6");
  const std::string message = test::error_of([&] {
    train(dir, {"tokens.train_steps=8", "checkpoints.checkpoint_interval=2", "general.nonfinite_policy=skip",
                "general.nonfinite_max_consecutive_skips=2"});
  });
  EXPECT_NE(message.find("step 5: the loss is nan"), std::string::npos) << message;
  EXPECT_NE(message.find("3 non-finite steps in a row (general.nonfinite_max_consecutive_skips = 2)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("the last good checkpoint is " + (dir / step_folder_name(4)).string()), std::string::npos)
      << message;
  fs::remove_all(dir);
}

TEST(NonFinitePolicy, StopNeverSavesADivergedModel) {
  const fs::path dir = fresh_dir("stop");
  // NaN gradients at step 5 make the parameters NaN; step 6 is not logged but due for a save.
  const ScopedFault fault("nan_grad:0:5");
  const std::string message = test::error_of([&] {
    train(dir, {"tokens.train_steps=8", "checkpoints.checkpoint_interval=3", "logging.iteration_step_info_interval=4"});
  });
  EXPECT_NE(message.find("step 6: the loss is nan"), std::string::npos) << message;
  EXPECT_NE(message.find("training diverged, stopping (general.nonfinite_policy: stop)"), std::string::npos) << message;
  EXPECT_NE(message.find("the last good checkpoint is " + (dir / step_folder_name(3)).string()), std::string::npos)
      << message;
  EXPECT_FALSE(fs::exists(dir / step_folder_name(6)));
  EXPECT_EQ(checkpoint::latest_checkpoint(dir), dir / step_folder_name(3));
  fs::remove_all(dir);
}

TEST(FaultInjection, AnUnknownPointIsRefusedByName) {
  const fs::path dir = fresh_dir("unknown_point");
  const ScopedFault fault("nan_lose:0:2");
  const std::string message = test::error_of([&] { train(dir, {"tokens.train_steps=2"}); });
  EXPECT_NE(message.find("TRIAX_FAULT='nan_lose:0:2': unknown point 'nan_lose'"), std::string::npos) << message;
  EXPECT_NE(message.find("nan_loss"), std::string::npos) << message;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace triax
