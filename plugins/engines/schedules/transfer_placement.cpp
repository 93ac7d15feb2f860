#include "transfer_placement.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <tuple>

#include "triax/chunk_placement.hpp"

namespace triax::plugins {
namespace {

// What travels between two virtual stages: the activation entering `stage`, or the gradient
// leaving it towards `stage` (sent by stage + 1).
struct Message {
  bool gradient = false;
  int stage = 0;  // the receiving virtual stage
  int micro_batch = 0;
  bool operator==(const Message& other) const {
    return gradient == other.gradient && stage == other.stage && micro_batch == other.micro_batch;
  }
};

class Placement {
 public:
  Placement(const ScheduleShape& shape, triax_chunk_placement placement)
      : shape_(shape), placement_(placement), steps_(shape.pp_size), outbox_(shape.pp_size) {}

  int stage_of(int rank, int chunk) const { return virtual_stage_of(placement_, shape_.pp_size, rank, chunk); }
  StageHolder holder_of(int stage) const { return holder_of_virtual_stage(placement_, shape_.pp_size, stage); }

  // Runs `pass` on `rank` if its input was produced already, with the receive before it.
  bool try_run(int rank, const Pass& pass) {
    const int stage = stage_of(rank, pass.chunk), last_stage = shape_.virtual_stages() - 1;
    const bool has_input = pass.forward() ? stage > 0 : pass.backpropagates_input() && stage < last_stage;
    if (has_input && !deliver({!pass.forward(), stage, pass.micro_batch})) return false;
    steps_[rank].push_back({step_kind_of(pass.kind), pass.chunk, pass.micro_batch, -1});
    if (pass.forward() && stage < last_stage) outbox_[rank].push_back({false, stage + 1, pass.micro_batch});
    if (pass.backpropagates_input() && stage > 0) outbox_[rank].push_back({true, stage - 1, pass.micro_batch});
    return true;
  }

  bool outbox_empty(int rank) const { return outbox_[rank].empty(); }
  std::vector<std::vector<ScheduleStep>> steps() && { return std::move(steps_); }

 private:
  // Moves `message` from its sender's outbox to its receiver, if it was produced already: the
  // send and the receive join both ranks' steps at this same moment.
  bool deliver(const Message& message) {
    const StageHolder sender = holder_of(message.gradient ? message.stage + 1 : message.stage - 1);
    const StageHolder receiver = holder_of(message.stage);
    auto& box = outbox_[sender.pp_rank];
    auto it = std::find(box.begin(), box.end(), message);
    if (it == box.end()) return false;
    box.erase(it);
    using Kind = ScheduleStep::Kind;
    steps_[sender.pp_rank].push_back({message.gradient ? Kind::SendGradient : Kind::SendOutput, sender.chunk,
                                      message.micro_batch, receiver.pp_rank});
    steps_[receiver.pp_rank].push_back({message.gradient ? Kind::ReceiveGradient : Kind::ReceiveInput, receiver.chunk,
                                        message.micro_batch, sender.pp_rank});
    return true;
  }

  ScheduleShape shape_;
  triax_chunk_placement placement_;
  std::vector<std::vector<ScheduleStep>> steps_;
  std::vector<std::vector<Message>> outbox_;  // of each rank: produced, not yet asked for
};

}  // namespace

std::vector<std::vector<ScheduleStep>> place_transfers(const ScheduleShape& shape, triax_chunk_placement placement,
                                                       const std::vector<std::vector<Pass>>& passes,
                                                       const std::string& schedule) {
  const int pp = shape.pp_size;
  if (static_cast<int>(passes.size()) != pp)
    throw std::logic_error(schedule + ": passes for " + std::to_string(passes.size()) + " ranks, pp is " +
                           std::to_string(pp));
  Placement placed(shape, placement);
  // Every rank runs its passes in order as far as their inputs allow, until none can go on.
  int stuck = run_ranks_in_order(passes, [&](int rank, const Pass& pass) { return placed.try_run(rank, pass); });
  for (int r = 0; r < pp && stuck < 0; ++r)
    if (!placed.outbox_empty(r)) stuck = r;
  if (stuck >= 0)
    throw std::logic_error(schedule + ": the passes of pipeline rank " + std::to_string(stuck) +
                           " cannot all run (a pass waits for one that never comes)");
  return std::move(placed).steps();
}

std::vector<std::vector<ScheduleStep>> place_transfers_in_time(const ScheduleShape& shape,
                                                               triax_chunk_placement placement,
                                                               const std::vector<std::vector<Pass>>& passes,
                                                               const std::vector<std::vector<double>>& starts,
                                                               const std::string& schedule) {
  std::vector<std::tuple<double, int, size_t>> order;  // (start, rank, index)
  for (size_t r = 0; r < passes.size(); ++r)
    for (size_t k = 0; k < passes[r].size(); ++k) order.emplace_back(starts.at(r).at(k), static_cast<int>(r), k);
  std::sort(order.begin(), order.end());
  Placement placed(shape, placement);
  for (const auto& [start, rank, index] : order)
    if (!placed.try_run(rank, passes[static_cast<size_t>(rank)][index]))
      throw std::logic_error(schedule + ": pass " + std::to_string(index) + " of pipeline rank " +
                             std::to_string(rank) + " starts before its input is made");
  return std::move(placed).steps();
}

namespace {

// What identifies a send among a rank's: its kind, chunk and micro-batch.
using SendKey = std::tuple<ScheduleStep::Kind, int, int>;

// The send a pass's tensor leaves by, if the rank's steps send one.
std::optional<SendKey> send_made_by(const ScheduleStep& pass) {
  using Kind = ScheduleStep::Kind;
  if (pass.kind == Kind::Forward) return SendKey{Kind::SendOutput, pass.chunk, pass.micro_batch};
  if (pass.kind == Kind::Backward || pass.kind == Kind::BackwardInput)
    return SendKey{Kind::SendGradient, pass.chunk, pass.micro_batch};
  return std::nullopt;
}

std::vector<ScheduleStep> sends_early(const std::vector<ScheduleStep>& steps) {
  std::map<int, std::deque<ScheduleStep>> by_peer;  // the sends to each peer, in order
  for (const ScheduleStep& step : steps)
    if (step.is_send()) by_peer[step.peer].push_back(step);
  std::set<SendKey> made;
  std::vector<ScheduleStep> placed;
  auto flush = [&] {
    for (auto& [peer, queue] : by_peer)
      while (!queue.empty() && made.count({queue.front().kind, queue.front().chunk, queue.front().micro_batch})) {
        placed.push_back(queue.front());
        queue.pop_front();
      }
  };
  for (const ScheduleStep& step : steps) {
    if (step.is_send()) continue;
    placed.push_back(step);
    if (const std::optional<SendKey> key = send_made_by(step)) made.insert(*key);
    flush();
  }
  for (const auto& [peer, queue] : by_peer)
    if (!queue.empty())
      throw std::logic_error("place_sends_early: a send to pipeline rank " + std::to_string(peer) +
                             " whose tensor no pass of its rank makes");
  return placed;
}

}  // namespace

std::vector<std::vector<ScheduleStep>> place_sends_early(const std::vector<std::vector<ScheduleStep>>& steps) {
  std::vector<std::vector<ScheduleStep>> placed;
  for (const std::vector<ScheduleStep>& rank_steps : steps) placed.push_back(sends_early(rank_steps));
  return placed;
}

}  // namespace triax::plugins
