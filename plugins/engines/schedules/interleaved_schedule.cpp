#include "interleaved_schedule.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "transfer_placement.hpp"

namespace triax::plugins {
namespace {

// Megatron's k-th forward (or backward) of a rank: micro-batches go through the chunks in groups
// of pp, chunk after chunk (backwards from the last chunk).
Pass pass_of(const ScheduleShape& shape, int k, bool forward) {
  const int group_size = shape.pp_size * shape.chunks;
  const int in_group = k % group_size;
  int chunk = in_group / shape.pp_size;
  if (!forward) chunk = shape.chunks - 1 - chunk;
  return {forward ? PassKind::Forward : PassKind::Backward, chunk,
          (k / group_size) * shape.pp_size + in_group % shape.pp_size};
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
  return peak_in_flight(interleaved_passes(shape, pp_rank));
}

std::vector<std::vector<ScheduleStep>> interleaved_schedule(const ScheduleShape& shape) {
  const std::string problem = schedule_shape_problem(shape);
  if (!problem.empty()) throw std::invalid_argument(problem);
  std::vector<std::vector<Pass>> passes;
  for (int r = 0; r < shape.pp_size; ++r) passes.push_back(interleaved_passes(shape, r));
  return place_transfers(shape, TRIAX_CHUNKS_INTERLEAVED, passes, "interleaved 1F1B");
}

}  // namespace triax::plugins
