#include "zero_bubble_schedule.hpp"

#include <climits>
#include <deque>
#include <optional>
#include <stdexcept>

#include "interleaved_schedule.hpp"
#include "transfer_placement.hpp"
#include "triax/chunk_placement.hpp"

namespace triax::plugins {
namespace {

constexpr int kNotRunYet = INT_MAX;

// All ranks at once, one pass per rank and unit of time (see the header for the preferences).
class UnitTimeRun {
 public:
  UnitTimeRun(const ScheduleShape& shape, const ZeroBubbleLayout& layout)
      : shape_(shape),
        layout_(layout),
        forward_end_(shape.virtual_stages(), std::vector<int>(shape.micro_batches, kNotRunYet)),
        input_gradient_end_(forward_end_),
        next_forward_(shape.virtual_stages(), 0),
        next_backward_(shape.virtual_stages(), 0),
        waiting_weights_(shape.pp_size),
        in_flight_(shape.pp_size, 0),
        passes_(shape.pp_size),
        next_in_order_(shape.pp_size, 0) {
    if (!layout.keeps_1f1b_order) return;
    for (int r = 0; r < shape.pp_size; ++r) {
      one_f_one_b_.push_back(interleaved_passes(shape, r));
      for (Pass& pass : one_f_one_b_.back())
        if (!pass.forward()) pass.kind = PassKind::BackwardInput;
    }
  }

  std::vector<std::vector<Pass>> run() && {
    const long total = 3L * shape_.virtual_stages() * shape_.micro_batches;
    long done = 0;
    for (int t = 0; done < total; ++t) {
      if (t > 4 * total) throw std::logic_error("zero-bubble schedule: the ranks stall (no rank can go on)");
      for (int r = 0; r < shape_.pp_size; ++r)
        if (const std::optional<Pass> pass = choose(r, t)) {
          record(r, *pass, t);
          ++done;
        }
    }
    return std::move(passes_);
  }

 private:
  int stage_of(int rank, int chunk) const { return virtual_stage_of(layout_.placement, shape_.pp_size, rank, chunk); }
  int last_stage() const { return shape_.virtual_stages() - 1; }

  bool forward_ready(int stage, int micro_batch, int t) const {
    return stage == 0 || forward_end_[stage - 1][micro_batch] <= t;
  }
  bool backward_ready(int stage, int micro_batch, int t) const {
    if (forward_end_[stage][micro_batch] > t) return false;
    return stage == last_stage() || input_gradient_end_[stage + 1][micro_batch] <= t;
  }

  // The next pass of `kind` on one of the rank's chunks that is ready: the oldest micro-batch,
  // then the later virtual stage (the one nearer the end of the micro-batch's pass).
  std::optional<Pass> next_ready(int rank, PassKind kind, int t) const {
    std::optional<Pass> best;
    int best_stage = -1;
    for (int chunk = 0; chunk < shape_.chunks; ++chunk) {
      const int stage = stage_of(rank, chunk);
      const int micro_batch = kind == PassKind::Forward ? next_forward_[stage] : next_backward_[stage];
      if (micro_batch >= shape_.micro_batches) continue;
      const bool ready =
          kind == PassKind::Forward ? forward_ready(stage, micro_batch, t) : backward_ready(stage, micro_batch, t);
      if (!ready) continue;
      if (!best || micro_batch < best->micro_batch || (micro_batch == best->micro_batch && stage > best_stage)) {
        best = Pass{kind, chunk, micro_batch};
        best_stage = stage;
      }
    }
    return best;
  }

  // The rank's next pass in its 1F1B order of forwards and input-backwards, if it can run now.
  std::optional<Pass> next_in_order(int rank, int t) const {
    if (next_in_order_[rank] >= one_f_one_b_[rank].size()) return std::nullopt;
    const Pass& pass = one_f_one_b_[rank][next_in_order_[rank]];
    const int stage = stage_of(rank, pass.chunk);
    if (pass.forward())
      return forward_ready(stage, pass.micro_batch, t) && in_flight_[rank] < layout_.in_flight_limit
                 ? std::optional<Pass>(pass)
                 : std::nullopt;
    return backward_ready(stage, pass.micro_batch, t) ? std::optional<Pass>(pass) : std::nullopt;
  }

  std::optional<Pass> choose(int rank, int t) const {
    if (layout_.keeps_1f1b_order) {
      if (auto pass = next_in_order(rank, t)) return pass;
    } else {
      if (auto backward = next_ready(rank, PassKind::BackwardInput, t)) return backward;
      if (in_flight_[rank] < layout_.in_flight_limit)
        if (auto forward = next_ready(rank, PassKind::Forward, t)) return forward;
    }
    if (!waiting_weights_[rank].empty()) return waiting_weights_[rank].front();
    return std::nullopt;
  }

  void record(int rank, const Pass& pass, int t) {
    const int stage = stage_of(rank, pass.chunk);
    switch (pass.kind) {
      case PassKind::Forward:
        forward_end_[stage][pass.micro_batch] = t + 1;
        ++next_forward_[stage];
        ++in_flight_[rank];
        break;
      case PassKind::BackwardInput:
        input_gradient_end_[stage][pass.micro_batch] = t + 1;
        ++next_backward_[stage];
        waiting_weights_[rank].push_back({PassKind::BackwardWeight, pass.chunk, pass.micro_batch});
        break;
      default:
        waiting_weights_[rank].pop_front();
        --next_in_order_[rank];  // a W is no step of the 1F1B order
        --in_flight_[rank];
        break;
    }
    passes_[rank].push_back(pass);
    ++next_in_order_[rank];
  }

  ScheduleShape shape_;
  ZeroBubbleLayout layout_;
  std::vector<std::vector<int>> forward_end_, input_gradient_end_;  // per virtual stage and micro-batch
  std::vector<int> next_forward_, next_backward_;                   // per virtual stage
  std::vector<std::deque<Pass>> waiting_weights_;                   // per rank
  std::vector<int> in_flight_;                                      // per rank
  std::vector<std::vector<Pass>> passes_;
  std::vector<std::vector<Pass>> one_f_one_b_;  // per rank, with keeps_1f1b_order
  std::vector<size_t> next_in_order_;           // per rank: its next pass of one_f_one_b_
};

}  // namespace

ZeroBubbleLayout zb_h1_layout(int pp_size) { return {1, TRIAX_CHUNKS_INTERLEAVED, pp_size, true}; }

ZeroBubbleLayout zb_v_layout(int pp_size) { return {2, TRIAX_CHUNKS_V, 2 * pp_size, false}; }

std::string zero_bubble_shape_problem(const std::string& engine, const ScheduleShape& shape) {
  if (shape.pp_size < 1) return "parallelism.pp: must be >= 1, got " + std::to_string(shape.pp_size);
  if (shape.micro_batches < shape.pp_size)
    return "tokens.batch_accumulation_per_replica: " + engine +
           " needs at least parallelism.pp = " + std::to_string(shape.pp_size) +
           " micro-batches per step to fill its pipeline, got " + std::to_string(shape.micro_batches) +
           " (raise it, or use parallelism.pp_engine: afab)";
  return "";
}

std::vector<std::vector<Pass>> zero_bubble_passes(const ScheduleShape& shape, const ZeroBubbleLayout& layout) {
  if (shape.chunks != layout.chunks || layout.in_flight_limit < 1)
    throw std::invalid_argument("zero-bubble schedule: a layout of " + std::to_string(layout.chunks) +
                                " chunks for a shape of " + std::to_string(shape.chunks));
  return UnitTimeRun(shape, layout).run();
}

std::vector<std::vector<ScheduleStep>> zero_bubble_schedule(const ScheduleShape& shape, const ZeroBubbleLayout& layout,
                                                            const std::string& engine) {
  const std::string problem = zero_bubble_shape_problem(engine, shape);
  if (!problem.empty()) throw std::invalid_argument(problem);
  return place_transfers(shape, layout.placement, zero_bubble_passes(shape, layout), engine);
}

}  // namespace triax::plugins
