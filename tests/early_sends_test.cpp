// Sends moved up to just after the passes that make their tensors (place_sends_early, for a host
// whose sends return at once) and the step simulator that times the steps as an engine runs them:
// a hand-timed case, then every schedule that places its transfers (interleaved_1f1b, zb_h1, zb_v)
// over several shapes.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>

#include "interleaved_schedule.hpp"
#include "step_simulator.hpp"
#include "transfer_placement.hpp"
#include "zero_bubble_schedule.hpp"

namespace triax::plugins {
namespace {

using Kind = ScheduleStep::Kind;

ScheduleStep pass_step(Kind kind, int micro_batch) { return {kind, 0, micro_batch, -1}; }
ScheduleStep transfer(Kind kind, int micro_batch, int peer) { return {kind, 0, micro_batch, peer}; }

RankPassTimes forward_only(double rank0, double rank1, double transfer) {
  return {{{{rank0, 0, 0, 0}}, {{rank1, 0, 0, 0}}}, transfer};
}

// Two forwards from rank 0 (F 2) to rank 1 (F 3), half a unit per hop. Sent after both forwards,
// both tensors arrive at 4.5 and rank 1 ends at 4.5 + 3 + 3 = 10.5; sent as made, the first
// arrives at 2.5, and rank 1 ends at 2.5 + 3 + 3 = 8.5, as the pass simulator says.
TEST(StepSimulator, ASendPlacedAfterLaterPassesDelaysItsReceiver) {
  const std::vector<ScheduleStep> receiver = {transfer(Kind::ReceiveInput, 0, 0), pass_step(Kind::Forward, 0),
                                              transfer(Kind::ReceiveInput, 1, 0), pass_step(Kind::Forward, 1)};
  const std::vector<ScheduleStep> late = {pass_step(Kind::Forward, 0), pass_step(Kind::Forward, 1),
                                          transfer(Kind::SendOutput, 0, 1), transfer(Kind::SendOutput, 1, 1)};
  const RankPassTimes times = forward_only(2, 3, 0.5);
  const SimulatedStep placed = simulate_steps({late, receiver}, times);
  EXPECT_DOUBLE_EQ(placed.step_time, 10.5);
  EXPECT_EQ(placed.starts[1], (std::vector<double>{4.5, 7.5}));
  EXPECT_DOUBLE_EQ(placed.busy[0], 4.0);

  const std::vector<std::vector<ScheduleStep>> early = place_sends_early({late, receiver});
  EXPECT_EQ(early[0][1].kind, Kind::SendOutput);
  EXPECT_EQ(early[0][2].kind, Kind::Forward);
  EXPECT_DOUBLE_EQ(simulate_steps(early, times).step_time, 8.5);
  const std::vector<Pass> forwards = {{PassKind::Forward, 0, 0}, {PassKind::Forward, 0, 1}};
  EXPECT_DOUBLE_EQ(simulate_schedule({2, 1, 2}, TRIAX_CHUNKS_INTERLEAVED, {forwards, forwards}, times).step_time, 8.5);
}

TEST(StepSimulator, NamesTheRankThatWaitsForATensorNeverSent) {
  const std::vector<ScheduleStep> rank0 = {transfer(Kind::ReceiveGradient, 0, 1), pass_step(Kind::Forward, 0),
                                           transfer(Kind::SendOutput, 0, 1)};
  const std::vector<ScheduleStep> rank1 = {transfer(Kind::ReceiveInput, 0, 0), pass_step(Kind::Forward, 0)};
  try {
    simulate_steps({rank0, rank1}, forward_only(1, 1, 0));
    FAIL() << "the steps deadlock";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("pipeline rank 0 waits for a tensor that is never sent"), std::string::npos)
        << e.what();
  }
}

using SendKey = std::tuple<Kind, int, int>;  // kind, chunk, micro-batch

std::map<int, std::vector<SendKey>> sends_by_peer(const std::vector<ScheduleStep>& steps) {
  std::map<int, std::vector<SendKey>> sends;
  for (const ScheduleStep& s : steps)
    if (s.is_send()) sends[s.peer].push_back({s.kind, s.chunk, s.micro_batch});
  return sends;
}

std::vector<std::tuple<Kind, int, int, int>> without_sends(const std::vector<ScheduleStep>& steps) {
  std::vector<std::tuple<Kind, int, int, int>> kept;
  for (const ScheduleStep& s : steps)
    if (!s.is_send()) kept.emplace_back(s.kind, s.chunk, s.micro_batch, s.peer);
  return kept;
}

// Passes, receives and each peer's order of sends unchanged; no pass between a send and the later
// of the pass that made its tensor and the send before it to the same peer.
void expect_sends_early(const std::vector<ScheduleStep>& placed, const std::vector<ScheduleStep>& early,
                        const std::string& where) {
  EXPECT_EQ(without_sends(early), without_sends(placed)) << where;
  EXPECT_EQ(sends_by_peer(early), sends_by_peer(placed)) << where;
  std::set<SendKey> made;
  std::map<int, bool> ready;  // per peer: whether its previous send is out and nothing ran since
  for (const ScheduleStep& s : early) {
    if (s.is_send()) {
      const Kind maker_kind = s.kind == Kind::SendOutput ? Kind::Forward : Kind::BackwardInput;
      EXPECT_TRUE(made.count({maker_kind, s.chunk, s.micro_batch}) || ready[s.peer]) << where << ": a send held back";
      ready[s.peer] = true;
      continue;
    }
    if (s.is_receive()) continue;
    made.clear();  // only the pass just run may release a send
    ready.clear();
    made.insert({s.kind == Kind::Backward ? Kind::BackwardInput : s.kind, s.chunk, s.micro_batch});
  }
}

void check_schedule(const ScheduleShape& shape, const std::vector<std::vector<ScheduleStep>>& placed,
                    const std::vector<std::vector<Pass>>& passes, triax_chunk_placement placement,
                    const std::string& name) {
  const std::string where =
      name + " pp " + std::to_string(shape.pp_size) + ", " + std::to_string(shape.micro_batches) + " micro-batches";
  const std::vector<std::vector<ScheduleStep>> early = place_sends_early(placed);
  for (int r = 0; r < shape.pp_size; ++r)
    expect_sends_early(placed[r], early[r], where + ", rank " + std::to_string(r));
  const RankPassTimes times = RankPassTimes::uniform({1.0, 1.4, 0.8, 0.1}, shape);
  const double as_placed = simulate_steps(placed, times).step_time;
  const double sent_early = simulate_steps(early, times).step_time;
  EXPECT_LE(sent_early, as_placed + 1e-9) << where;
  // Sent as made, the run is what the pass simulator times.
  EXPECT_NEAR(sent_early, simulate_schedule(shape, placement, passes, times).step_time, 1e-9) << where;
}

TEST(EarlySends, EverySendFollowsItsPassAndTheRunIsThePassSimulators) {
  const PassTimes times{1.0, 1.4, 0.8, 0.0};
  for (const int pp : {2, 4})
    for (const int micro_batches : {pp, 2 * pp, 16}) {
      const ScheduleShape interleaved{pp, 2, micro_batches};
      std::vector<std::vector<Pass>> passes;
      for (int r = 0; r < pp; ++r) passes.push_back(interleaved_passes(interleaved, r));
      check_schedule(interleaved, interleaved_schedule(interleaved), passes, TRIAX_CHUNKS_INTERLEAVED, "interleaved");
      for (const ZeroBubbleLayout& layout : {zb_h1_layout(pp), zb_v_layout(pp)}) {
        const ScheduleShape shape{pp, layout.chunks, micro_batches};
        const std::string name = layout.chunks == 1 ? "zb_h1" : "zb_v";
        check_schedule(shape, zero_bubble_schedule(shape, layout, name, times),
                       zero_bubble_passes(shape, layout, times), layout.placement, name);
      }
    }
}

}  // namespace
}  // namespace triax::plugins
