#include "zero_bubble_run.hpp"

#include <deque>
#include <limits>
#include <optional>
#include <stdexcept>

#include "interleaved_schedule.hpp"
#include "triax/chunk_placement.hpp"

namespace triax::plugins {
namespace {

constexpr double kNotRunYet = std::numeric_limits<double>::infinity();

// What a rank could run next, and from when.
struct Choice {
  Pass pass;
  double at = 0.0;
};

class GreedyRun {
 public:
  GreedyRun(const ScheduleShape& shape, const ZeroBubbleLayout& layout, const PassTimes& times, bool lookahead,
            std::vector<std::vector<Pass>> in_order, const Perturbation& perturbation)
      : shape_(shape),
        layout_(layout),
        times_(times),
        lookahead_(lookahead),
        perturbation_(perturbation),
        forward_end_(shape.virtual_stages(), std::vector<double>(shape.micro_batches, kNotRunYet)),
        input_gradient_end_(forward_end_),
        next_forward_(shape.virtual_stages(), 0),
        next_backward_(shape.virtual_stages(), 0),
        waiting_weights_(shape.pp_size),
        in_flight_(shape.pp_size, 0),
        free_at_(shape.pp_size, 0.0),
        passes_(shape.pp_size),
        in_order_(std::move(in_order)),
        next_in_order_(shape.pp_size, 0) {}

  std::vector<std::vector<Pass>> run() && {
    const long total = 3L * shape_.virtual_stages() * shape_.micro_batches;
    double now = 0.0;
    for (long done = 0; done < total;) {
      std::optional<Choice> earliest;
      int rank = -1;
      for (int r = 0; r < shape_.pp_size; ++r) {
        const std::optional<Choice> choice = choose(r, std::max(now, free_at_[r]));
        if (choice && (!earliest || choice->at < earliest->at)) earliest = choice, rank = r;
      }
      if (!earliest) throw std::logic_error("zero-bubble schedule: the ranks stall (no rank can go on)");
      record(rank, earliest->pass, earliest->at);
      now = earliest->at;
      ++done;
    }
    return std::move(passes_);
  }

 private:
  int stage_of(int rank, int chunk) const { return virtual_stage_of(layout_.placement, shape_.pp_size, rank, chunk); }
  int last_stage() const { return shape_.virtual_stages() - 1; }

  // When the input of a pass is there (kNotRunYet: not produced yet).
  double forward_input(int stage, int micro_batch) const {
    return stage == 0 ? 0.0 : forward_end_[stage - 1][micro_batch];
  }
  double backward_input(int stage, int micro_batch) const {
    const double own = forward_end_[stage][micro_batch];
    return stage == last_stage() ? own : std::max(own, input_gradient_end_[stage + 1][micro_batch]);
  }
  double input_of(int rank, const Pass& pass) const {
    const int stage = stage_of(rank, pass.chunk);
    return pass.forward() ? forward_input(stage, pass.micro_batch) : backward_input(stage, pass.micro_batch);
  }
  bool may_forward(int rank) const { return in_flight_[rank] < layout_.in_flight_limit; }

  // The rank's candidate F and B passes, next in their stage's order (or 1F1B's).
  std::vector<Pass> candidates(int rank) const {
    std::vector<Pass> out;
    if (!in_order_.empty()) {
      if (next_in_order_[rank] < in_order_[rank].size()) out.push_back(in_order_[rank][next_in_order_[rank]]);
      return out;
    }
    for (const PassKind kind : {PassKind::BackwardInput, PassKind::Forward})
      for (int chunk = 0; chunk < shape_.chunks; ++chunk) {
        const int stage = stage_of(rank, chunk);
        const int micro_batch = kind == PassKind::Forward ? next_forward_[stage] : next_backward_[stage];
        if (micro_batch < shape_.micro_batches) out.push_back({kind, chunk, micro_batch});
      }
    return out;
  }

  // B before F; the oldest micro-batch, then the later virtual stage.
  bool preferred(int rank, const Pass& a, const Pass& b) const {
    if (a.forward() != b.forward()) return !a.forward();
    if (a.micro_batch != b.micro_batch) return a.micro_batch < b.micro_batch;
    return stage_of(rank, a.chunk) > stage_of(rank, b.chunk);
  }

  // The rank's next pass from `now` on: the preferred of those whose input is there soonest;
  // while none can start now, its oldest waiting W (unless, with the lookahead, an input arrives
  // before that W would end).
  std::optional<Choice> choose(int rank, double now) const {
    std::optional<Pass> best;
    double best_at = kNotRunYet;
    for (const Pass& pass : candidates(rank)) {
      if (pass.forward() && !may_forward(rank)) continue;
      const double at = std::max(now, input_of(rank, pass));
      if (at < best_at || (at == best_at && at != kNotRunYet && preferred(rank, pass, *best))) {
        best = pass;
        best_at = at;
      }
    }
    if (best && best_at == now) return Choice{perturbed(rank, *best, now), now};
    const bool weight_fits = !lookahead_ || best_at >= now + duration_of(PassKind::BackwardWeight);
    if (!waiting_weights_[rank].empty() && weight_fits) return Choice{waiting_weights_[rank].front(), now};
    if (best) return Choice{*best, best_at};
    return std::nullopt;
  }

  double duration_of(PassKind kind) const { return pass_duration(times_, kind, shape_.chunks); }

  // A number in [0, 1) from the perturbation's seed and the pass (splitmix64).
  double coin(int rank, const Pass& pass, uint64_t salt) const {
    uint64_t x = perturbation_.seed ^ (static_cast<uint64_t>(rank) << 48) ^ (static_cast<uint64_t>(pass.chunk) << 40) ^
                 (static_cast<uint64_t>(pass.micro_batch) << 8) ^ (salt << 4) ^ static_cast<uint64_t>(pass.kind);
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return static_cast<double>((x ^ (x >> 31)) >> 11) / 9007199254740992.0;
  }

  // The pass to run now instead of `best` (ready now), by the perturbation, or `best`.
  Pass perturbed(int rank, const Pass& best, double now) const {
    if (perturbation_.seed == 0) return best;
    if (best.forward()) {
      const bool weight = !waiting_weights_[rank].empty() && coin(rank, best, 1) < perturbation_.weight_before_forward;
      return weight ? waiting_weights_[rank].front() : best;
    }
    if (!may_forward(rank)) return best;
    for (const Pass& pass : candidates(rank))
      if (pass.forward() && input_of(rank, pass) <= now && coin(rank, pass, 2) < perturbation_.forward_before_backward)
        return pass;
    return best;
  }

  void record(int rank, const Pass& pass, double at) {
    const int stage = stage_of(rank, pass.chunk);
    const double end = at + duration_of(pass.kind);
    switch (pass.kind) {
      case PassKind::Forward:
        forward_end_[stage][pass.micro_batch] = end;
        ++next_forward_[stage];
        ++in_flight_[rank];
        ++next_in_order_[rank];
        break;
      case PassKind::BackwardInput:
        input_gradient_end_[stage][pass.micro_batch] = end;
        ++next_backward_[stage];
        ++next_in_order_[rank];
        waiting_weights_[rank].push_back({PassKind::BackwardWeight, pass.chunk, pass.micro_batch});
        break;
      default:
        waiting_weights_[rank].pop_front();
        --in_flight_[rank];
        break;
    }
    free_at_[rank] = end;
    passes_[rank].push_back(pass);
  }

  ScheduleShape shape_;
  ZeroBubbleLayout layout_;
  PassTimes times_;  // of a stage's: a chunk's pass takes 1/chunks
  bool lookahead_;
  Perturbation perturbation_;
  std::vector<std::vector<double>> forward_end_, input_gradient_end_;  // per virtual stage and micro-batch
  std::vector<int> next_forward_, next_backward_;                      // per virtual stage
  std::vector<std::deque<Pass>> waiting_weights_;                      // per rank
  std::vector<int> in_flight_;                                         // per rank
  std::vector<double> free_at_;                                        // per rank
  std::vector<std::vector<Pass>> passes_;
  std::vector<std::vector<Pass>> in_order_;  // per rank, its F and B to run in this order, or empty
  std::vector<size_t> next_in_order_;        // per rank: its next pass of in_order_
};

// 1F1B's F and B of each rank, each B an input backward.
std::vector<std::vector<Pass>> one_f_one_b_order(const ScheduleShape& shape) {
  std::vector<std::vector<Pass>> kept(shape.pp_size);
  for (int r = 0; r < shape.pp_size; ++r)
    for (Pass pass : interleaved_passes(shape, r)) {
      if (!pass.forward()) pass.kind = PassKind::BackwardInput;
      kept[r].push_back(pass);
    }
  return kept;
}

}  // namespace

std::vector<std::vector<Pass>> zero_bubble_run(const ScheduleShape& shape, const ZeroBubbleLayout& layout,
                                               const PassTimes& times, bool lookahead,
                                               const Perturbation& perturbation) {
  if (shape.chunks != layout.chunks || layout.in_flight_limit < 1)
    throw std::invalid_argument("zero-bubble schedule: a layout of " + std::to_string(layout.chunks) +
                                " chunks for a shape of " + std::to_string(shape.chunks));
  if (!(times.forward > 0 && times.backward_input > 0 && times.backward_weight > 0))
    throw std::invalid_argument("zero-bubble schedule: pass times must be positive");
  std::vector<std::vector<Pass>> order;
  if (layout.keeps_1f1b_order) order = one_f_one_b_order(shape);
  return GreedyRun(shape, layout, times, lookahead, std::move(order), perturbation).run();
}

}  // namespace triax::plugins
