// The schedule simulator fed per pipeline rank and model chunk (RankPassTimes, what `triax inspect
// schedule --record` gives it from a run): schedules small enough to time by hand.
#include "schedule_simulator.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace triax::plugins {
namespace {

ChunkPassTimes whole(double forward, double backward) { return {forward, 0.0, 0.0, backward}; }
ChunkPassTimes split(double forward, double input, double weight) { return {forward, input, weight, input + weight}; }

// afab at pp 2 with 2 micro-batches, rank 0 fast (F 1, backward 2), rank 1 slow (F 3, backward 4):
//   rank 1: F0 [1, 4], F1 [4, 7], B0 [7, 11], B1 [11, 15]
//   rank 0: F0 [0, 1], F1 [1, 2], B0 waits for rank 1's B0: [11, 13], B1 [15, 17]
TEST(RankPassTimes, EachRankAtItsOwnPace) {
  const std::vector<Pass> afab = {
      {PassKind::Forward, 0, 0}, {PassKind::Forward, 0, 1}, {PassKind::Backward, 0, 0}, {PassKind::Backward, 0, 1}};
  RankPassTimes times{{{whole(1, 2)}, {whole(3, 4)}}, 0.0};
  const SimulatedStep step = simulate_schedule({2, 1, 2}, TRIAX_CHUNKS_INTERLEAVED, {afab, afab}, times);
  EXPECT_DOUBLE_EQ(step.step_time, 17.0);
  EXPECT_DOUBLE_EQ(step.busy[0], 6.0);
  EXPECT_DOUBLE_EQ(step.busy[1], 14.0);
  EXPECT_DOUBLE_EQ(step.bubble_fraction, 1.0 - 10.0 / 17.0);
  EXPECT_EQ(step.starts[0], (std::vector<double>{0, 1, 11, 15}));
  // Half a unit per hop: rank 1 starts at 1.5 and ends at 15.5, rank 0's last backward at 16.
  times.transfer = 0.5;
  EXPECT_DOUBLE_EQ(simulate_schedule({2, 1, 2}, TRIAX_CHUNKS_INTERLEAVED, {afab, afab}, times).step_time, 18.0);
}

// One micro-batch down and up a V at pp 2 (rank 0 holds virtual stages 0 and 3, rank 1 stages 1
// and 2), each chunk with times of its own (F = B = W = 1, 2 on rank 0's chunks, 3, 4 on rank 1's):
//   rank 0: F c0 [0, 1]; F c1 (stage 3) [8, 10]; B c1 [10, 12]; W c1 [12, 14]; B c0 waits: [19, 20]; W c0 [20, 21]
//   rank 1: F c0 (stage 1) [1, 4]; F c1 (stage 2) [4, 8]; B c1 [12, 16]; B c0 [16, 19]; W c1 [19, 23]; W c0 [23, 26]
TEST(RankPassTimes, EachChunkAtItsOwnPace) {
  const std::vector<Pass> rank0 = {{PassKind::Forward, 0, 0},       {PassKind::Forward, 1, 0},
                                   {PassKind::BackwardInput, 1, 0}, {PassKind::BackwardWeight, 1, 0},
                                   {PassKind::BackwardInput, 0, 0}, {PassKind::BackwardWeight, 0, 0}};
  const std::vector<Pass> rank1 = {{PassKind::Forward, 0, 0},        {PassKind::Forward, 1, 0},
                                   {PassKind::BackwardInput, 1, 0},  {PassKind::BackwardInput, 0, 0},
                                   {PassKind::BackwardWeight, 1, 0}, {PassKind::BackwardWeight, 0, 0}};
  const RankPassTimes times{{{split(1, 1, 1), split(2, 2, 2)}, {split(3, 3, 3), split(4, 4, 4)}}, 0.0};
  const SimulatedStep step = simulate_schedule({2, 2, 1}, TRIAX_CHUNKS_V, {rank0, rank1}, times);
  EXPECT_DOUBLE_EQ(step.step_time, 26.0);
  EXPECT_EQ(step.starts[0], (std::vector<double>{0, 8, 10, 12, 19, 20}));
  EXPECT_EQ(step.starts[1], (std::vector<double>{1, 4, 12, 16, 19, 23}));
  EXPECT_DOUBLE_EQ(step.bubble_fraction, 1.0 - 15.0 / 26.0);
}

TEST(RankPassTimes, UniformSharesTheStageAmongChunks) {
  const RankPassTimes times = RankPassTimes::uniform({2.0, 4.0, 6.0, 0.5}, {3, 2, 4});
  ASSERT_EQ(times.by_rank.size(), 3u);
  EXPECT_DOUBLE_EQ(times.duration(2, {PassKind::Forward, 1, 0}), 1.0);
  EXPECT_DOUBLE_EQ(times.duration(0, {PassKind::BackwardWeight, 0, 3}), 3.0);
  EXPECT_DOUBLE_EQ(times.duration(1, {PassKind::Backward, 1, 2}), 5.0);
  EXPECT_DOUBLE_EQ(times.transfer, 0.5);
  EXPECT_THROW(times.duration(3, {PassKind::Forward, 0, 0}), std::logic_error);
  EXPECT_THROW(times.duration(0, {PassKind::Forward, 2, 0}), std::logic_error);
}

}  // namespace
}  // namespace triax::plugins
