#include "interleaved_schedule.hpp"

#include <algorithm>
#include <stdexcept>

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

// Megatron's k-th forward (or backward) of a rank: micro-batches go through the chunks in groups
// of pp, chunk after chunk (backwards from the last chunk).
Pass pass_of(const ScheduleShape& shape, int k, bool forward) {
  const int group_size = shape.pp_size * shape.chunks;
  const int in_group = k % group_size;
  int chunk = in_group / shape.pp_size;
  if (!forward) chunk = shape.chunks - 1 - chunk;
  return {forward, chunk, (k / group_size) * shape.pp_size + in_group % shape.pp_size};
}

}  // namespace

std::string schedule_shape_problem(const ScheduleShape& shape) {
  if (shape.pp_size < 1) return "parallelism.pp: must be >= 1, got " + std::to_string(shape.pp_size);
  if (shape.chunks < 1) return "parallelism.pp_chunks_per_rank: must be >= 1, got " + std::to_string(shape.chunks);
  if (shape.micro_batches < 1)
    return "tokens.batch_accumulation_per_replica: a step needs at least one micro-batch, got " +
           std::to_string(shape.micro_batches);
  if (shape.chunks == 1) return "";
  if (shape.pp_size < 2)
    return "parallelism.pp_chunks_per_rank: interleaving " + std::to_string(shape.chunks) +
           " model chunks needs parallelism.pp >= 2, got pp = 1 (set pp_chunks_per_rank: 1)";
  if (shape.micro_batches % shape.pp_size != 0) {
    const int next = (shape.micro_batches / shape.pp_size + 1) * shape.pp_size;
    return "tokens.batch_accumulation_per_replica: interleaved_1f1b with parallelism.pp_chunks_per_rank = " +
           std::to_string(shape.chunks) +
           " runs micro-batches in groups of parallelism.pp = " + std::to_string(shape.pp_size) +
           ", so it needs a multiple of " + std::to_string(shape.pp_size) + " micro-batches per step, got " +
           std::to_string(shape.micro_batches) + " (use " + std::to_string(next) +
           ", or parallelism.pp_chunks_per_rank: 1)";
  }
  return "";
}

int warm_up_passes(const ScheduleShape& shape, int pp_rank) {
  const int total = shape.micro_batches * shape.chunks;
  if (shape.chunks == 1) return std::min(shape.pp_size - pp_rank - 1, total);  // plain 1F1B
  // As many micro-batches as stages: every forward first (Megatron does the same).
  if (shape.micro_batches == shape.pp_size) return total;
  return std::min((shape.pp_size - pp_rank - 1) * 2 + (shape.chunks - 1) * shape.pp_size, total);
}

std::vector<Pass> interleaved_passes(const ScheduleShape& shape, int pp_rank) {
  const int total = shape.micro_batches * shape.chunks;
  const int warm_up = warm_up_passes(shape, pp_rank);
  std::vector<Pass> passes;
  passes.reserve(static_cast<size_t>(2 * total));
  for (int k = 0; k < warm_up; ++k) passes.push_back(pass_of(shape, k, true));
  for (int k = 0; k + warm_up < total; ++k) {  // steady state: one forward, one backward
    passes.push_back(pass_of(shape, k + warm_up, true));
    passes.push_back(pass_of(shape, k, false));
  }
  for (int k = total - warm_up; k < total; ++k) passes.push_back(pass_of(shape, k, false));  // cool-down
  return passes;
}

int peak_live_passes(const ScheduleShape& shape, int pp_rank) {
  int live = 0, peak = 0;
  for (const Pass& pass : interleaved_passes(shape, pp_rank)) {
    live += pass.forward ? 1 : -1;
    peak = std::max(peak, live);
  }
  return peak;
}

std::vector<std::vector<ScheduleStep>> interleaved_schedule(const ScheduleShape& shape) {
  const std::string problem = schedule_shape_problem(shape);
  if (!problem.empty()) throw std::invalid_argument(problem);
  using Kind = ScheduleStep::Kind;
  const int pp = shape.pp_size, last_stage = shape.virtual_stages() - 1;

  std::vector<std::vector<Pass>> passes;
  for (int r = 0; r < pp; ++r) passes.push_back(interleaved_passes(shape, r));
  std::vector<std::vector<ScheduleStep>> steps(pp);
  std::vector<std::vector<Message>> outbox(pp);  // of each rank: produced, not yet asked for
  std::vector<size_t> next(pp, 0);               // of each rank: its next pass

  // Moves `message` from its sender's outbox to its receiver, if it was produced already: the
  // send and the receive join both ranks' steps at this same moment.
  auto deliver = [&](const Message& message) {
    const int sender_stage = message.gradient ? message.stage + 1 : message.stage - 1;
    const int sender = sender_stage % pp, receiver = message.stage % pp;
    auto& box = outbox[sender];
    auto it = std::find(box.begin(), box.end(), message);
    if (it == box.end()) return false;
    box.erase(it);
    steps[sender].push_back(
        {message.gradient ? Kind::SendGradient : Kind::SendOutput, sender_stage / pp, message.micro_batch, receiver});
    steps[receiver].push_back({message.gradient ? Kind::ReceiveGradient : Kind::ReceiveInput, message.stage / pp,
                               message.micro_batch, sender});
    return true;
  };

  // Every rank runs its passes in order as far as their inputs allow, until none can go on.
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (int r = 0; r < pp; ++r) {
      for (; next[r] < passes[r].size(); ++next[r], progressed = true) {
        const Pass& pass = passes[r][next[r]];
        const int stage = pass.chunk * pp + r;
        const bool has_input = pass.forward ? stage > 0 : stage < last_stage;
        if (has_input && !deliver({!pass.forward, stage, pass.micro_batch})) break;  // not produced yet
        steps[r].push_back({pass.forward ? Kind::Forward : Kind::Backward, pass.chunk, pass.micro_batch, -1});
        if (pass.forward && stage < last_stage) outbox[r].push_back({false, stage + 1, pass.micro_batch});
        if (!pass.forward && stage > 0) outbox[r].push_back({true, stage - 1, pass.micro_batch});
      }
    }
  }
  for (int r = 0; r < pp; ++r)
    if (next[r] != passes[r].size() || !outbox[r].empty())
      throw std::logic_error("interleaved 1F1B: the passes of pipeline rank " + std::to_string(r) +
                             " cannot all run (a pass waits for one that never comes)");
  return steps;
}

}  // namespace triax::plugins
