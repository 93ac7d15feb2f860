// The interleaved 1F1B schedule (plugins/engines/schedules/interleaved_schedule.hpp):
// Megatron's order of passes, the micro-batch counts it refuses, and, for many shapes, that every
// rank's steps run to the end when each send blocks until its peer receives it, every transfer
// meeting the one its peer expects. The same check shows that the passes with their transfers
// placed in line (receive, run, send) would deadlock.
#include "interleaved_schedule.hpp"

#include <gtest/gtest.h>

#include "pipeline_schedule_checks.hpp"

namespace triax::plugins {
namespace {

using Kind = ScheduleStep::Kind;

std::string passes_text(const std::vector<Pass>& passes) {
  std::string text;
  for (const Pass& p : passes)
    text += (text.empty() ? "" : " ") + std::string(p.forward() ? "F" : "B") + std::to_string(p.chunk) + "." +
            std::to_string(p.micro_batch);
  return text;
}

std::vector<ScheduleShape> shapes() {
  std::vector<ScheduleShape> out;
  for (int pp : {2, 3, 4, 8})
    for (int chunks : {1, 2, 3, 4})
      for (int groups : {1, 2, 3, 5}) out.push_back({pp, chunks, groups * pp});
  for (int pp : {1, 2, 4})
    for (int m : {1, 3, 7}) out.push_back({pp, 1, m});  // one chunk: any count
  return out;
}

TEST(InterleavedSchedule, FollowsMegatronsOrderOfPasses) {
  const ScheduleShape shape{2, 2, 4};
  // Rank 0 warms up with (pp - 1) * 2 + (chunks - 1) * pp = 4 forwards, rank 1 with 2; chunks
  // go forward in groups of pp micro-batches and backward from the last chunk.
  EXPECT_EQ(warm_up_passes(shape, 0), 4);
  EXPECT_EQ(warm_up_passes(shape, 1), 2);
  EXPECT_EQ(passes_text(interleaved_passes(shape, 0)),
            "F0.0 F0.1 F1.0 F1.1 F0.2 B1.0 F0.3 B1.1 F1.2 B0.0 F1.3 B0.1 B1.2 B1.3 B0.2 B0.3");
  EXPECT_EQ(passes_text(interleaved_passes(shape, 1)),
            "F0.0 F0.1 F1.0 B1.0 F1.1 B1.1 F0.2 B0.0 F0.3 B0.1 F1.2 B1.2 F1.3 B1.3 B0.2 B0.3");
  // As many micro-batches as stages: every forward first, as in Megatron.
  EXPECT_EQ(warm_up_passes({2, 2, 2}, 1), 4);
  // One chunk is plain 1F1B: pp - rank - 1 warm-up forwards.
  EXPECT_EQ(passes_text(interleaved_passes({2, 1, 3}, 0)), "F0.0 F0.1 B0.0 F0.2 B0.1 B0.2");
}

TEST(InterleavedSchedule, PeakLiveIsTheWarmUpPlusOne) {
  for (const ScheduleShape& shape : shapes())
    for (int r = 0; r < shape.pp_size; ++r)
      EXPECT_EQ(peak_live_passes(shape, r), std::min(warm_up_passes(shape, r) + 1, shape.micro_batches * shape.chunks))
          << shape_text(shape) << ", rank " << r;
  EXPECT_EQ(peak_live_passes({4, 2, 8}, 0), 11);
  EXPECT_EQ(peak_live_passes({4, 2, 8}, 3), 5);
}

TEST(InterleavedSchedule, EveryRankRunsToTheEndWithBlockingSends) {
  for (const ScheduleShape& shape : shapes()) {
    const auto steps = interleaved_schedule(shape);
    ASSERT_EQ(static_cast<int>(steps.size()), shape.pp_size);
    EXPECT_EQ(run_with_blocking_sends(shape, steps), "") << shape_text(shape);
    for (int r = 0; r < shape.pp_size; ++r) {  // the passes themselves keep Megatron's order
      std::vector<Pass> passes;
      for (const ScheduleStep& s : steps[r])
        if (s.kind == Kind::Forward || s.kind == Kind::Backward)
          passes.push_back(
              {s.kind == Kind::Forward ? PassKind::Forward : PassKind::Backward, s.chunk, s.micro_batch});
      EXPECT_EQ(passes_text(passes), passes_text(interleaved_passes(shape, r))) << shape_text(shape);
    }
  }
}

TEST(InterleavedSchedule, TransfersPlacedInLineWouldDeadlock) {
  // The passes of each rank with a receive right before and a send right after each: in the ring
  // of pp 2, both ranks end up sending to each other at once.
  const ScheduleShape shape{2, 2, 4};
  std::vector<std::vector<ScheduleStep>> in_line(2);
  for (int r = 0; r < 2; ++r)
    for (const Pass& p : interleaved_passes(shape, r)) {
      const int v = p.chunk * 2 + r, peer = 1 - r;
      const bool has_input = p.forward() ? v > 0 : v < 3, has_output = p.forward() ? v < 3 : v > 0;
      if (has_input)
        in_line[r].push_back({p.forward() ? Kind::ReceiveInput : Kind::ReceiveGradient, p.chunk, p.micro_batch, peer});
      in_line[r].push_back({p.forward() ? Kind::Forward : Kind::Backward, p.chunk, p.micro_batch, -1});
      if (has_output)
        in_line[r].push_back({p.forward() ? Kind::SendOutput : Kind::SendGradient, p.chunk, p.micro_batch, peer});
    }
  EXPECT_EQ(run_with_blocking_sends(shape, in_line).rfind("deadlock", 0), 0u);
}

TEST(InterleavedSchedule, RefusesImpossibleShapesNamingTheKey) {
  const std::string uneven = schedule_shape_problem({4, 2, 6});
  EXPECT_NE(uneven.find("tokens.batch_accumulation_per_replica"), std::string::npos) << uneven;
  EXPECT_NE(uneven.find("multiple of 4"), std::string::npos) << uneven;
  EXPECT_NE(uneven.find("use 8"), std::string::npos) << uneven;
  const std::string one_stage = schedule_shape_problem({1, 2, 4});
  EXPECT_NE(one_stage.find("parallelism.pp_chunks_per_rank"), std::string::npos) << one_stage;
  EXPECT_NE(schedule_shape_problem({2, 0, 4}).find("parallelism.pp_chunks_per_rank"), std::string::npos);
  EXPECT_EQ(schedule_shape_problem({4, 1, 3}), "");  // one chunk takes any count
  EXPECT_THROW(interleaved_schedule({4, 2, 6}), std::invalid_argument);
}

}  // namespace
}  // namespace triax::plugins
