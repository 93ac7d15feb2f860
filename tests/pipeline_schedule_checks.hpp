// Checks of a pipeline schedule's steps shared by the schedule tests: every rank's steps run as
// processes would run them with blocking sends. Plain C++, header only.
#pragma once

#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "pipeline_schedule.hpp"
#include "triax/chunk_placement.hpp"

namespace triax::plugins {

inline std::string step_text(int rank, const ScheduleStep& step) {
  static const char* names[] = {"receive input", "forward",       "send output",    "receive gradient",
                                "backward",      "send gradient", "backward input", "backward weight"};
  std::ostringstream out;
  out << "rank " << rank << ": " << names[static_cast<int>(step.kind)] << " chunk " << step.chunk << " micro-batch "
      << step.micro_batch;
  if (step.peer >= 0) out << (step.is_send() ? " to " : " from ") << step.peer;
  return out.str();
}

// Runs every rank's steps as processes would with blocking sends: a pass runs once its input is
// there (an input gradient's B before its W); a send completes only together with its peer's
// receive, which must expect exactly that tensor; a hand-over to the same rank waits for its
// receive in that rank's own list. Returns "" when every step ran and every (chunk, micro-batch)
// went forward and all the way backward, else what went wrong.
inline std::string run_with_blocking_sends(const ScheduleShape& shape,
                                           const std::vector<std::vector<ScheduleStep>>& steps,
                                           triax_chunk_placement placement = TRIAX_CHUNKS_INTERLEAVED) {
  using Kind = ScheduleStep::Kind;
  const int pp = shape.pp_size, last = shape.virtual_stages() - 1;
  // Per rank: (gradient?, chunk, micro-batch) that arrived, and (step kind, chunk, micro-batch) run.
  std::vector<std::set<std::tuple<bool, int, int>>> inputs(pp), handed_over(pp);
  std::vector<std::set<std::tuple<Kind, int, int>>> done(pp);
  std::vector<size_t> at(pp, 0);
  auto stage = [&](int rank, int chunk) { return virtual_stage_of(placement, pp, rank, chunk); };
  auto ran = [&](int r, Kind kind, const ScheduleStep& s) { return done[r].count({kind, s.chunk, s.micro_batch}) > 0; };
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (int r = 0; r < pp; ++r) {
      if (at[r] == steps[r].size()) continue;
      const ScheduleStep& s = steps[r][at[r]];
      const int v = stage(r, s.chunk);
      const bool backward = s.kind == Kind::Backward || s.kind == Kind::BackwardInput;
      if (s.kind == Kind::Forward || backward || s.kind == Kind::BackwardWeight) {
        if (s.kind == Kind::Forward && v > 0 && !inputs[r].count({false, s.chunk, s.micro_batch}))
          return step_text(r, s) + " runs before its input arrived";
        if (backward && v < last && !inputs[r].count({true, s.chunk, s.micro_batch}))
          return step_text(r, s) + " runs before its input arrived";
        if (backward && !ran(r, Kind::Forward, s)) return step_text(r, s) + " runs before its forward";
        if (s.kind == Kind::BackwardWeight && !ran(r, Kind::BackwardInput, s))
          return step_text(r, s) + " runs before its backward input";
        if (ran(r, s.kind, s)) return step_text(r, s) + " runs twice";
        done[r].insert({s.kind, s.chunk, s.micro_batch});
      } else if (s.is_send()) {
        const bool gradient = s.kind == Kind::SendGradient;
        const bool produced =
            gradient ? ran(r, Kind::Backward, s) || ran(r, Kind::BackwardInput, s) : ran(r, Kind::Forward, s);
        if (!produced) return step_text(r, s) + " before its pass ran";
        if (s.peer < 0 || s.peer >= pp) return step_text(r, s) + ": no peer";
        if (s.peer == r) {
          handed_over[r].insert({gradient, v + (gradient ? -1 : 1), s.micro_batch});
        } else {
          if (at[s.peer] == steps[s.peer].size()) return step_text(r, s) + ": no peer";
          const ScheduleStep& peer = steps[s.peer][at[s.peer]];
          if (!peer.is_receive() || peer.peer != r) continue;  // blocked until the peer gets there
          const bool match = peer.kind == (gradient ? Kind::ReceiveGradient : Kind::ReceiveInput) &&
                             peer.micro_batch == s.micro_batch && stage(s.peer, peer.chunk) == v + (gradient ? -1 : 1);
          if (!match) return step_text(r, s) + " meets " + step_text(s.peer, peer);
          inputs[s.peer].insert({gradient, peer.chunk, peer.micro_batch});
          ++at[s.peer];
        }
      } else if (s.peer == r) {  // a receive of what this rank handed over to itself
        const bool gradient = s.kind == Kind::ReceiveGradient;
        if (!handed_over[r].erase({gradient, v, s.micro_batch})) return step_text(r, s) + " before its hand-over";
        inputs[r].insert({gradient, s.chunk, s.micro_batch});
      } else {
        continue;  // a receive from another rank completes with its peer's send
      }
      ++at[r];
      progressed = true;
    }
  }
  for (int r = 0; r < pp; ++r)
    if (at[r] != steps[r].size()) return "deadlock: " + step_text(r, steps[r][at[r]]) + " waits forever";
  for (int r = 0; r < pp; ++r)
    for (int c = 0; c < shape.chunks; ++c)
      for (int i = 0; i < shape.micro_batches; ++i) {
        const ScheduleStep s{Kind::Forward, c, i, -1};
        const bool whole =
            ran(r, Kind::Backward, s) || (ran(r, Kind::BackwardInput, s) && ran(r, Kind::BackwardWeight, s));
        if (!ran(r, Kind::Forward, s) || !whole)
          return "rank " + std::to_string(r) + " never runs every pass of chunk " + std::to_string(c) +
                 " micro-batch " + std::to_string(i);
      }
  return "";
}

inline std::string shape_text(const ScheduleShape& s) {
  return "pp " + std::to_string(s.pp_size) + ", chunks " + std::to_string(s.chunks) + ", micro-batches " +
         std::to_string(s.micro_batches);
}

}  // namespace triax::plugins
