// The interleaved 1F1B schedule (plugins/engines/interleaved_1f1b/interleaved_schedule.hpp):
// Megatron's order of passes, the micro-batch counts it refuses, and, for many shapes, that every
// rank's steps run to the end when each send blocks until its peer receives it, every transfer
// meeting the one its peer expects. The same check shows that the passes with their transfers
// placed in line (receive, run, send) would deadlock.
#include "interleaved_schedule.hpp"

#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <tuple>

namespace triax::plugins {
namespace {

using Kind = ScheduleStep::Kind;

std::string passes_text(const std::vector<Pass>& passes) {
  std::string text;
  for (const Pass& p : passes)
    text += (text.empty() ? "" : " ") + std::string(p.forward ? "F" : "B") + std::to_string(p.chunk) + "." +
            std::to_string(p.micro_batch);
  return text;
}

std::string step_text(int rank, const ScheduleStep& step) {
  static const char* names[] = {"receive input",    "forward",  "send output",
                                "receive gradient", "backward", "send gradient"};
  std::ostringstream out;
  out << "rank " << rank << ": " << names[static_cast<int>(step.kind)] << " chunk " << step.chunk << " micro-batch "
      << step.micro_batch;
  if (step.peer >= 0) out << (step.is_send() ? " to " : " from ") << step.peer;
  return out.str();
}

// Runs every rank's steps as processes would with blocking sends: a pass runs once its input is
// there; a send completes only together with its peer's receive, which must expect exactly that
// tensor. Returns "" when every step ran, else what went wrong.
std::string run_with_blocking_sends(const ScheduleShape& shape, const std::vector<std::vector<ScheduleStep>>& steps) {
  const int pp = shape.pp_size, last = shape.virtual_stages() - 1;
  // Per rank: (forward?, chunk, micro-batch) whose input arrived, and passes done.
  std::vector<std::set<std::tuple<bool, int, int>>> inputs(pp), done(pp);
  std::vector<size_t> at(pp, 0);
  auto stage = [pp](int rank, int chunk) { return chunk * pp + rank; };
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (int r = 0; r < pp; ++r) {
      if (at[r] == steps[r].size()) continue;
      const ScheduleStep& s = steps[r][at[r]];
      const int v = stage(r, s.chunk);
      if (s.kind == Kind::Forward || s.kind == Kind::Backward) {
        const bool forward = s.kind == Kind::Forward;
        if ((forward ? v > 0 : v < last) && !inputs[r].count({forward, s.chunk, s.micro_batch}))
          return step_text(r, s) + " runs before its input arrived";
        if (!forward && !done[r].count({true, s.chunk, s.micro_batch}))
          return step_text(r, s) + " runs before its forward";
        done[r].insert({forward, s.chunk, s.micro_batch});
      } else if (s.is_send()) {
        const bool gradient = s.kind == Kind::SendGradient;
        if (!done[r].count({!gradient, s.chunk, s.micro_batch})) return step_text(r, s) + " before its pass ran";
        if (s.peer < 0 || s.peer >= pp || at[s.peer] == steps[s.peer].size()) return step_text(r, s) + ": no peer";
        const ScheduleStep& peer = steps[s.peer][at[s.peer]];
        if (!peer.is_receive() || peer.peer != r) continue;  // blocked until the peer gets there
        const bool match = peer.kind == (gradient ? Kind::ReceiveGradient : Kind::ReceiveInput) &&
                           peer.micro_batch == s.micro_batch && stage(s.peer, peer.chunk) == v + (gradient ? -1 : 1);
        if (!match) return step_text(r, s) + " meets " + step_text(s.peer, peer);
        inputs[s.peer].insert({!gradient, peer.chunk, peer.micro_batch});
        ++at[s.peer];
      } else {
        continue;  // a receive completes with its peer's send
      }
      ++at[r];
      progressed = true;
    }
  }
  for (int r = 0; r < pp; ++r)
    if (at[r] != steps[r].size()) return "deadlock: " + step_text(r, steps[r][at[r]]) + " waits forever";
  for (int r = 0; r < pp; ++r)
    if (done[r].size() != static_cast<size_t>(2 * shape.chunks * shape.micro_batches))
      return "rank " + std::to_string(r) + " ran " + std::to_string(done[r].size()) + " distinct passes";
  return "";
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

std::string shape_text(const ScheduleShape& s) {
  return "pp " + std::to_string(s.pp_size) + ", chunks " + std::to_string(s.chunks) + ", micro-batches " +
         std::to_string(s.micro_batches);
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
          passes.push_back({s.kind == Kind::Forward, s.chunk, s.micro_batch});
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
      const bool has_input = p.forward ? v > 0 : v < 3, has_output = p.forward ? v < 3 : v > 0;
      if (has_input)
        in_line[r].push_back({p.forward ? Kind::ReceiveInput : Kind::ReceiveGradient, p.chunk, p.micro_batch, peer});
      in_line[r].push_back({p.forward ? Kind::Forward : Kind::Backward, p.chunk, p.micro_batch, -1});
      if (has_output)
        in_line[r].push_back({p.forward ? Kind::SendOutput : Kind::SendGradient, p.chunk, p.micro_batch, peer});
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
