// Staging a background save's copies in spare device memory (which pieces, in how much room) and
// the host copies they land in, without a training run.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <vector>

#include "device_staging.hpp"
#include "host_snapshot.hpp"
#include "triax/kernels/piece_copies.hpp"

namespace triax::checkpoint {
namespace {

// Staging in device memory needs the checkpoint's bytes beside the training's measured peak, what
// the device holds outside the caching allocator and the margin; before any step, never.
TEST(DeviceStaging, StagesOnlyWhereTheCheckpointFitsBesideTheTrainingsPeak) {
  constexpr int64_t GB = 1000 * 1000 * 1000;
  StagingRoom room;
  room.needed = 24 * GB;
  room.total = 80 * GB;
  room.peak_reserved = 50 * GB;
  room.outside_allocator = 1 * GB;
  room.margin = 2 * GB;
  room.steps_measured = true;
  EXPECT_EQ(room.spare(), 27 * GB);
  EXPECT_TRUE(room.fits());
  room.peak_reserved = 53 * GB;  // exactly the bytes needed
  EXPECT_TRUE(room.fits());
  room.peak_reserved = 53 * GB + 1;
  EXPECT_FALSE(room.fits());
  room.peak_reserved = 54 * GB;
  EXPECT_NE(room.describe().find("24.000000 GB needed, 23.000000 GB spare"), std::string::npos) << room.describe();
  room.peak_reserved = 10 * GB;
  room.steps_measured = false;  // a save before the first step: the peak is not the training's yet
  EXPECT_FALSE(room.fits());
  EXPECT_NE(room.describe().find("no step has run yet"), std::string::npos) << room.describe();
}

// When the whole checkpoint does not fit, the largest pieces that still fit are staged (the
// earlier of equal ones first) and the others copied directly; all of them when it fits, none
// before a step was measured or where no piece fits.
TEST(DeviceStaging, StagesTheLargestPiecesThatFitInTheSpareMemory) {
  const std::vector<int64_t> pieces = {10, 40, 5, 30, 40};  // 125 bytes
  auto plan_with = [&](int64_t spare, bool steps_measured = true, bool small_room = false) {
    StagingRoom room;
    room.needed = 125;
    room.total = spare;
    room.steps_measured = steps_measured;
    room.small_room = small_room;
    return plan_staging(pieces, room);
  };
  auto expect_plan = [](const StagingPlan& plan, const std::vector<bool>& staged, int64_t staged_bytes) {
    EXPECT_EQ(plan.staged, staged);
    EXPECT_EQ(plan.staged_bytes, staged_bytes);
    EXPECT_EQ(plan.direct_bytes, 125 - staged_bytes);
  };
  expect_plan(plan_with(100), {true, true, true, false, true}, 95);  // 40, 40, 10 and 5: the 30 no longer fits
  EXPECT_EQ(plan_with(100).staged_pieces(), 4);
  expect_plan(plan_with(50), {true, true, false, false, false}, 50);  // the first 40, then the 10
  expect_plan(plan_with(4), std::vector<bool>(5, false), 0);           // no piece fits
  expect_plan(plan_with(125), std::vector<bool>(5, true), 125);        // the whole checkpoint fits
  expect_plan(plan_with(125, false), std::vector<bool>(5, false), 0);  // before the first step
  // The test fault caps the spare bytes at half those needed (62): 40, 10 and 5.
  expect_plan(plan_with(125, true, true), {true, true, true, false, false}, 55);
}

// A fake device: 80 GB, the steps' peak at 57 GB reserved, 1 GB outside the allocator, the 2 GiB
// margin: about 19.9 GB spare for a 22.5 GB checkpoint. Its largest pieces are staged, the rest go
// to the host directly; after the allocator retried beside the last staging buffer, none is staged.
TEST(DeviceStaging, SplitsACheckpointLargerThanTheFreeMemory) {
  constexpr int64_t GB = 1000 * 1000 * 1000;
  const std::vector<int64_t> pieces = {8 * GB, 6 * GB, 4 * GB, 3 * GB, GB, GB / 2};  // 22.5 GB
  StagingRoom room;
  room.needed = 22 * GB + GB / 2;
  room.total = 80 * GB;
  room.peak_reserved = 57 * GB;
  room.outside_allocator = GB;
  room.margin = kStagingMargin;
  room.steps_measured = true;
  EXPECT_EQ(room.spare(), 22 * GB - kStagingMargin);
  const StagingPlan plan = plan_staging(pieces, room);
  // 8 + 6 + 4 leave 1.85 GB: the 3 GB piece goes direct, the 1 and the 0.5 still fit.
  EXPECT_EQ(plan.staged, (std::vector<bool>{true, true, true, false, true, true}));
  EXPECT_EQ(plan.staged_bytes, 19 * GB + GB / 2);
  EXPECT_EQ(plan.direct_bytes, 3 * GB);
  room.allocator_retried = true;
  EXPECT_EQ(room.spare(), 0);
  EXPECT_EQ(plan_staging(pieces, room).staged_bytes, 0);
  EXPECT_NE(room.describe().find("the caching allocator ran out of memory"), std::string::npos) << room.describe();
}

// The staging copies' kernel: every chunk of every non-empty piece is one block's, in order.
TEST(PieceCopies, ChunksCoverEveryPieceOnce) {
  using kernels::DeviceCopyPiece, kernels::number_chunks, kernels::piece_of_chunk;
  std::vector<DeviceCopyPiece> pieces(5);
  const std::vector<int64_t> bytes = {100, 0, 250, 1, 300};
  for (size_t i = 0; i < pieces.size(); ++i) pieces[i].bytes = bytes[i];
  const int64_t chunks = number_chunks(pieces, 100);
  ASSERT_EQ(pieces.size(), 4u);  // the empty piece dropped
  EXPECT_EQ(chunks, 1 + 3 + 1 + 3);
  const std::vector<int64_t> first = {0, 1, 4, 5};
  const std::vector<int64_t> owner = {0, 1, 1, 1, 2, 3, 3, 3};
  for (size_t i = 0; i < pieces.size(); ++i) EXPECT_EQ(pieces[i].first_chunk, first[i]);
  for (int64_t chunk = 0; chunk < chunks; ++chunk)
    EXPECT_EQ(piece_of_chunk(pieces.data(), static_cast<int64_t>(pieces.size()), chunk), owner[static_cast<size_t>(chunk)]);
}

TEST(HostSnapshot, CopiesTheValuesOfTheMomentIntoReusedBuffers) {
  HostSnapshot snapshot(c10::Device(c10::kCPU));
  const at::Tensor values = at::arange(6, at::kFloat).reshape({2, 3});
  const NamedParameter weight{"w", values, ParameterSpec::replicated(values)};
  RankContents live;
  live.parameters.push_back(&weight);
  live.optimizer_state.push_back({&weight, "exp_avg", at::full({2, 3}, 7.0f), 0, false});
  RankContents first = snapshot.take(live, StagingConditions{});
  const void* buffer = first.parameters.front()->tensor.data_ptr();
  weight.tensor.add_(1);  // training goes on
  snapshot.wait_until_copied();
  EXPECT_TRUE(at::equal(first.parameters.front()->tensor, at::arange(6, at::kFloat).reshape({2, 3})));
  EXPECT_TRUE(at::equal(first.optimizer_state.front().tensor, at::full({2, 3}, 7.0f)));
  EXPECT_EQ(first.optimizer_state.front().parameter->name, "w");
  const int64_t bytes = snapshot.buffer_bytes();  // the two copies' 48 bytes, each on its own cache line
  EXPECT_GE(bytes, 2 * 6 * 4);
  EXPECT_LE(bytes, 2 * 64);
  RankContents second = snapshot.take(live, StagingConditions{});
  EXPECT_EQ(second.parameters.front()->tensor.data_ptr(), buffer);  // the same host memory, no new allocation
  EXPECT_TRUE(at::equal(second.parameters.front()->tensor, weight.tensor));
  EXPECT_EQ(snapshot.buffer_bytes(), bytes);
}

// On a GPU the staged pieces go through one kernel launch: pieces of every size and alignment
// (a 0-dim counter, 3 bytes, a view starting at an odd byte, several chunks) land in host memory
// equal to the live tensors, and the event times are there once the next optimizer step waited.
TEST(HostSnapshotCuda, StagedPiecesInOneLaunchEqualTheLiveTensors) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const auto on_gpu = at::TensorOptions().device(at::kCUDA);
  const at::Tensor bytes = at::randint(0, 255, {4099}, on_gpu.dtype(at::kByte));
  const std::vector<at::Tensor> values = {at::randn({3 * 1024 * 1024 + 5}, on_gpu), at::randn({}, on_gpu),
                                          bytes.narrow(0, 0, 3), bytes.narrow(0, 1, 4097),
                                          at::randn({64, 96}, on_gpu.dtype(at::kBFloat16))};
  std::deque<NamedParameter> parameters;
  RankContents live;
  for (size_t i = 0; i < values.size(); ++i) {
    parameters.push_back({"p" + std::to_string(i), values[i], ParameterSpec::replicated(values[i])});
    live.parameters.push_back(&parameters.back());
  }
  std::vector<at::Tensor> expected;
  for (const at::Tensor& v : values) expected.push_back(v.cpu());
  HostSnapshot snapshot(values.front().device());
  StagingConditions conditions;
  conditions.steps_measured = true;
  const RankContents copy = snapshot.take(live, conditions);
  EXPECT_NE(snapshot.copy_path().find("staged in device memory"), std::string::npos) << snapshot.copy_path();
  snapshot.before_optimizer_step();
  for (const at::Tensor& v : values) v.zero_();  // the optimizer step, queued after the wait
  snapshot.wait_until_copied();
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_TRUE(at::equal(copy.parameters[i]->tensor, expected[i])) << "piece " << i;
  const CopyTimes times = snapshot.copy_times();
  EXPECT_TRUE(times.stall_measured);
  EXPECT_GT(times.device_copies, 0.0);
  EXPECT_GE(times.stall, 0.0);
  EXPECT_EQ(times.allocator_retries, 0);
}

}  // namespace
}  // namespace triax::checkpoint
