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

// Every rank's steps run as processes would run them with blocking sends (see
// run_with_blocking_sends below).
class BlockingRun {
 public:
  using Kind = ScheduleStep::Kind;
  BlockingRun(const ScheduleShape& shape, const std::vector<std::vector<ScheduleStep>>& steps,
              triax_chunk_placement placement)
      : shape_(shape),
        steps_(steps),
        placement_(placement),
        inputs_(shape.pp_size),
        handed_over_(shape.pp_size),
        done_(shape.pp_size),
        at_(shape.pp_size, 0) {}

  std::string run() {
    for (bool progressed = true; progressed;) {
      progressed = false;
      for (int r = 0; r < shape_.pp_size; ++r) {
        if (at_[r] == steps_[r].size()) continue;
        std::string problem;
        const bool stepped = step(r, steps_[r][at_[r]], problem);
        if (!problem.empty()) return problem;
        if (stepped) ++at_[r], progressed = true;
      }
    }
    for (int r = 0; r < shape_.pp_size; ++r)
      if (at_[r] != steps_[r].size()) return "deadlock: " + step_text(r, steps_[r][at_[r]]) + " waits forever";
    return every_pass_ran();
  }

 private:
  int stage(int rank, int chunk) const { return virtual_stage_of(placement_, shape_.pp_size, rank, chunk); }
  bool ran(int r, Kind kind, const ScheduleStep& s) const { return done_[r].count({kind, s.chunk, s.micro_batch}) > 0; }

  // Runs rank r's next step if it can; false while it waits, `problem` set when it never can.
  bool step(int r, const ScheduleStep& s, std::string& problem) {
    if (s.is_send()) return send(r, s, problem);
    if (s.is_receive()) return s.peer == r && receive_handed_over(r, s, problem);  // else done with its send
    return run_pass(r, s, problem);
  }

  bool run_pass(int r, const ScheduleStep& s, std::string& problem) {
    const int v = stage(r, s.chunk), last = shape_.virtual_stages() - 1;
    const bool backward = s.kind == Kind::Backward || s.kind == Kind::BackwardInput;
    if ((s.kind == Kind::Forward && v > 0 && !inputs_[r].count({false, s.chunk, s.micro_batch})) ||
        (backward && v < last && !inputs_[r].count({true, s.chunk, s.micro_batch})))
      problem = step_text(r, s) + " runs before its input arrived";
    else if (backward && !ran(r, Kind::Forward, s))
      problem = step_text(r, s) + " runs before its forward";
    else if (s.kind == Kind::BackwardWeight && !ran(r, Kind::BackwardInput, s))
      problem = step_text(r, s) + " runs before its backward input";
    else if (ran(r, s.kind, s))
      problem = step_text(r, s) + " runs twice";
    done_[r].insert({s.kind, s.chunk, s.micro_batch});
    return problem.empty();
  }

  bool send(int r, const ScheduleStep& s, std::string& problem) {
    const bool gradient = s.kind == Kind::SendGradient;
    const int to = stage(r, s.chunk) + (gradient ? -1 : 1);
    const bool produced =
        gradient ? ran(r, Kind::Backward, s) || ran(r, Kind::BackwardInput, s) : ran(r, Kind::Forward, s);
    if (!produced) problem = step_text(r, s) + " before its pass ran";
    if (s.peer < 0 || s.peer >= shape_.pp_size || (s.peer != r && at_[s.peer] == steps_[s.peer].size()))
      problem = step_text(r, s) + ": no peer";
    if (!problem.empty()) return false;
    if (s.peer == r) return handed_over_[r].insert({gradient, to, s.micro_batch}).second;
    const ScheduleStep& peer = steps_[s.peer][at_[s.peer]];
    if (!peer.is_receive() || peer.peer != r) return false;  // blocked until the peer gets there
    const bool match = peer.kind == (gradient ? Kind::ReceiveGradient : Kind::ReceiveInput) &&
                       peer.micro_batch == s.micro_batch && stage(s.peer, peer.chunk) == to;
    if (!match) problem = step_text(r, s) + " meets " + step_text(s.peer, peer);
    if (!match) return false;
    inputs_[s.peer].insert({gradient, peer.chunk, peer.micro_batch});
    ++at_[s.peer];
    return true;
  }

  // A receive of what this rank handed over to itself (two chunks of one rank).
  bool receive_handed_over(int r, const ScheduleStep& s, std::string& problem) {
    const bool gradient = s.kind == Kind::ReceiveGradient;
    if (!handed_over_[r].erase({gradient, stage(r, s.chunk), s.micro_batch})) {
      problem = step_text(r, s) + " before its hand-over";
      return false;
    }
    inputs_[r].insert({gradient, s.chunk, s.micro_batch});
    return true;
  }

  std::string every_pass_ran() const {
    for (int r = 0; r < shape_.pp_size; ++r)
      for (int c = 0; c < shape_.chunks; ++c)
        for (int i = 0; i < shape_.micro_batches; ++i) {
          const ScheduleStep s{Kind::Forward, c, i, -1};
          const bool whole =
              ran(r, Kind::Backward, s) || (ran(r, Kind::BackwardInput, s) && ran(r, Kind::BackwardWeight, s));
          if (!ran(r, Kind::Forward, s) || !whole)
            return "rank " + std::to_string(r) + " never runs every pass of chunk " + std::to_string(c) +
                   " micro-batch " + std::to_string(i);
        }
    return "";
  }

  const ScheduleShape& shape_;
  const std::vector<std::vector<ScheduleStep>>& steps_;
  triax_chunk_placement placement_;
  // Per rank: (gradient?, chunk, micro-batch) that arrived, (gradient?, receiving stage,
  // micro-batch) handed over to itself, and (step kind, chunk, micro-batch) run.
  std::vector<std::set<std::tuple<bool, int, int>>> inputs_, handed_over_;
  std::vector<std::set<std::tuple<Kind, int, int>>> done_;
  std::vector<size_t> at_;
};

// Runs every rank's steps as processes would with blocking sends: a pass runs once its input is
// there (an input gradient's B before its W); a send completes only together with its peer's
// receive, which must expect exactly that tensor; a hand-over to the same rank waits for its
// receive in that rank's own list. Returns "" when every step ran and every (chunk, micro-batch)
// went forward and all the way backward, else what went wrong.
inline std::string run_with_blocking_sends(const ScheduleShape& shape,
                                           const std::vector<std::vector<ScheduleStep>>& steps,
                                           triax_chunk_placement placement = TRIAX_CHUNKS_INTERLEAVED) {
  return BlockingRun(shape, steps, placement).run();
}

inline std::string shape_text(const ScheduleShape& s) {
  return "pp " + std::to_string(s.pp_size) + ", chunks " + std::to_string(s.chunks) + ", micro-batches " +
         std::to_string(s.micro_batches);
}

}  // namespace triax::plugins
