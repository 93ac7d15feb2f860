// The zero-bubble schedules (plugins/engines/schedules/zero_bubble_schedule.hpp) and the schedule
// simulator, for many shapes: every (chunk, micro-batch) runs F, then B, then W on its rank, each
// B after the next stage's B and each F after the previous stage's F, every rank's steps run to
// the end with blocking sends, the in-flight peaks are the layouts' bounds, and the simulated
// bubble at equal F, B and W times is what the schedules promise.
#include "zero_bubble_schedule.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "interleaved_schedule.hpp"
#include "pipeline_schedule_checks.hpp"
#include "schedule_simulator.hpp"
#include "shipped_schedules.hpp"

namespace triax::plugins {
namespace {

struct Engine {
  const char* name;
  ZeroBubbleLayout (*layout)(int pp_size);
};
const Engine kEngines[] = {{"zb_h1", zb_h1_layout}, {"zb_v", zb_v_layout}};

std::vector<ScheduleShape> shapes(int chunks) {
  std::vector<ScheduleShape> out;
  for (int pp : {1, 2, 3, 4, 8})
    for (int extra : {0, 1, 3, 9}) out.push_back({pp, chunks, pp + extra});
  out.push_back({4, chunks, 16});
  out.push_back({8, chunks, 32});
  return out;
}

// (stage, micro-batch) -> the pass's position in time, from a run with unit times.
using Order = std::map<std::tuple<int, int, PassKind>, int>;

// Each rank's passes placed one unit apart from when their rank and their input allow: the order
// in which the schedule's passes can run, for checking dependencies across ranks.
Order unit_time_order(const ScheduleShape& shape, const ZeroBubbleLayout& layout,
                      const std::vector<std::vector<Pass>>& passes) {
  Order order;
  for (int r = 0; r < shape.pp_size; ++r)
    for (size_t k = 0; k < passes[r].size(); ++k) {
      const Pass& p = passes[r][k];
      const int stage = virtual_stage_of(layout.placement, shape.pp_size, r, p.chunk);
      EXPECT_TRUE(order.emplace(std::make_tuple(stage, p.micro_batch, p.kind), static_cast<int>(k)).second)
          << shape_text(shape) << ": stage " << stage << " runs a pass of micro-batch " << p.micro_batch << " twice";
    }
  return order;
}

// Every (stage, micro-batch) runs F, B and W once each, in that order on its rank.
void expect_every_pass_once_in_order(const Engine& engine, const ScheduleShape& shape, const ZeroBubbleLayout& layout,
                                     const std::vector<std::vector<Pass>>& passes) {
  const Order order = unit_time_order(shape, layout, passes);
  ASSERT_EQ(order.size(), static_cast<size_t>(3 * shape.virtual_stages() * shape.micro_batches))
      << engine.name << ", " << shape_text(shape);
  for (int stage = 0; stage < shape.virtual_stages(); ++stage)
    for (int i = 0; i < shape.micro_batches; ++i) {
      const int f = order.at({stage, i, PassKind::Forward}), b = order.at({stage, i, PassKind::BackwardInput});
      EXPECT_LT(f, b) << engine.name << ", " << shape_text(shape) << ", stage " << stage << ", micro-batch " << i;
      EXPECT_LT(b, order.at({stage, i, PassKind::BackwardWeight})) << engine.name << ", " << shape_text(shape);
    }
}

TEST(ZeroBubbleSchedule, EveryPassOnceAfterWhatItNeedsOnItsRank) {
  for (const Engine& engine : kEngines)
    for (const ScheduleShape& shape : shapes(engine.layout(1).chunks)) {
      const ZeroBubbleLayout layout = engine.layout(shape.pp_size);
      expect_every_pass_once_in_order(engine, shape, layout, zero_bubble_passes(shape, layout));
    }
}

TEST(ZeroBubbleSchedule, RunsToTheEndWithBlockingSendsAndCrossRankDependencies) {
  for (const Engine& engine : kEngines)
    for (const ScheduleShape& shape : shapes(engine.layout(1).chunks)) {
      const ZeroBubbleLayout layout = engine.layout(shape.pp_size);
      const auto steps = zero_bubble_schedule(shape, layout, engine.name);
      // An F before its predecessor's F or a B before its successor's B would stop the run.
      EXPECT_EQ(run_with_blocking_sends(shape, steps, layout.placement), "")
          << engine.name << ", " << shape_text(shape);
      EXPECT_NO_THROW(simulate_schedule(shape, layout.placement, zero_bubble_passes(shape, layout), PassTimes{}))
          << engine.name << ", " << shape_text(shape);
    }
}

TEST(ZeroBubbleSchedule, HoldsAtMostItsLayoutsMicroBatchesInFlight) {
  for (const ScheduleShape& shape : shapes(1)) {
    const auto passes = zero_bubble_passes(shape, zb_h1_layout(shape.pp_size));
    // 1F1B's peak, that of its first rank, on every rank.
    for (int r = 0; r < shape.pp_size; ++r)
      EXPECT_EQ(peak_in_flight(passes[r]), peak_live_passes(shape, 0)) << shape_text(shape) << ", rank " << r;
  }
  for (const ScheduleShape& shape : shapes(2)) {
    const auto passes = zero_bubble_passes(shape, zb_v_layout(shape.pp_size));
    for (int r = 0; r < shape.pp_size; ++r) {
      EXPECT_LE(peak_in_flight(passes[r]), 2 * shape.pp_size) << shape_text(shape) << ", rank " << r;
      if (shape.pp_size > 1 && shape.micro_batches % shape.pp_size == 0) {  // interleaved's shapes
        EXPECT_LE(peak_in_flight(passes[r]), peak_live_passes(shape, 0)) << shape_text(shape) << ", rank " << r;
      }
    }
  }
}

double bubble(const std::string& engine, int pp, int micro_batches) {
  const EngineSchedule s = shipped_schedule(engine, pp, micro_batches);
  return simulate_schedule(s.shape, s.placement, s.passes, PassTimes{}).bubble_fraction;
}

TEST(ZeroBubbleSchedule, ShrinksTheBubbleAtEqualPassTimes) {
  for (int pp : {2, 4, 8})
    for (int m : {8, 16, 32}) {
      // 1F1B: pp - 1 passes of F + B + W idle in m + pp - 1; ZB-H1: pp - 1 units in 3m + pp - 1;
      // ZB-V: the last rank's wait for its first input, pp - 1 chunk forwards.
      const double one_f_one_b = bubble("1f1b", pp, m);
      EXPECT_NEAR(one_f_one_b, (pp - 1.0) / (m + pp - 1.0), 1e-9);
      EXPECT_NEAR(bubble("zb_h1", pp, m), (pp - 1.0) / (3.0 * m + pp - 1.0), 1e-9) << "pp " << pp << ", m " << m;
      EXPECT_NEAR(bubble("zb_v", pp, m), (pp - 1.0) / (6.0 * m + pp - 1.0), 1e-9) << "pp " << pp << ", m " << m;
    }
  // The goals at pp 4 and 16 micro-batches.
  EXPECT_LE(bubble("zb_h1", 4, 16), bubble("1f1b", 4, 16) / 2);
  EXPECT_LE(bubble("zb_v", 4, 16), bubble("1f1b", 4, 16) / 5);
}

TEST(ZeroBubbleSchedule, OrdersForMeasuredTimesAreNeverSlowerAndKeepTheInvariants) {
  const PassTimes measured[] = {{1.0, 1.1, 0.9, 0.0}, {1.0, 2.0, 1.0, 0.0}, {37.0, 54.5, 26.5, 0.0}};
  for (const Engine& engine : kEngines)
    for (const PassTimes& times : measured)
      for (int pp : {2, 4, 8}) {
        const ZeroBubbleLayout layout = engine.layout(pp);
        const ScheduleShape shape{pp, layout.chunks, 2 * pp};
        const auto for_times = zero_bubble_passes(shape, layout, times);
        const double step = simulate_schedule(shape, layout.placement, for_times, times).step_time;
        const auto equal = zero_bubble_passes(shape, layout);
        EXPECT_LE(step, simulate_schedule(shape, layout.placement, equal, times).step_time * (1 + 1e-12))
            << engine.name << ", pp " << pp << ", B " << times.backward_input;
        for (int r = 0; r < pp; ++r)
          EXPECT_LE(peak_in_flight(for_times[r]), zero_bubble_in_flight_cap(shape, layout)) << engine.name;
        EXPECT_EQ(
            run_with_blocking_sends(shape, zero_bubble_schedule(shape, layout, engine.name, times), layout.placement),
            "")
            << engine.name << ", " << shape_text(shape);
      }
  // Far from equal times, the order for them is the faster (pp 4, 16 micro-batches: 27.8% of the
  // step idle in zb_v's order of equal times, 2.9% in the order for the times).
  const PassTimes skewed{37.0, 54.5, 26.5, 0.0};
  const ZeroBubbleLayout v = zb_v_layout(4);
  const ScheduleShape shape{4, 2, 16};
  EXPECT_LT(simulate_schedule(shape, v.placement, zero_bubble_passes(shape, v, skewed), skewed).bubble_fraction, 0.06);
  EXPECT_GT(simulate_schedule(shape, v.placement, zero_bubble_passes(shape, v), skewed).bubble_fraction, 0.2);
}

// One stage of SmolLM-1.7B on an H100 (bf16, micro-batches of 8 x 2048 tokens; docs/pipeline-schedules.md):
// 6 layers at pp 4, 3 at pp 8.
struct GpuStage {
  int pp;
  PassTimes times;
};
const GpuStage kGpuStages[] = {{4, {25.196, 31.018, 18.291, 0.0}}, {8, {12.645, 16.056, 9.385, 0.0}}};

// Each rank's passes, from its steps (the transfers left out): the order the search chose, without
// running the search again.
std::vector<std::vector<Pass>> passes_of(const std::vector<std::vector<ScheduleStep>>& steps) {
  std::vector<std::vector<Pass>> passes(steps.size());
  for (size_t r = 0; r < steps.size(); ++r)
    for (const ScheduleStep& step : steps[r])
      for (const PassKind kind : {PassKind::Forward, PassKind::BackwardInput, PassKind::BackwardWeight})
        if (step.kind == step_kind_of(kind)) passes[r].push_back({kind, step.chunk, step.micro_batch});
  return passes;
}

TEST(ZeroBubbleSchedule, OrdersForTheGpuTimesRunEveryPassOnceWithinTheirPeaks) {
  for (const GpuStage& gpu : kGpuStages)
    for (int m : {8, 16, 32})
      for (const Engine& engine : kEngines) {
        const ZeroBubbleLayout layout = engine.layout(gpu.pp);
        const ScheduleShape shape{gpu.pp, layout.chunks, m};
        const auto steps = zero_bubble_schedule(shape, layout, engine.name, gpu.times);
        const auto passes = passes_of(steps);
        expect_every_pass_once_in_order(engine, shape, layout, passes);
        EXPECT_EQ(run_with_blocking_sends(shape, steps, layout.placement), "")
            << engine.name << ", " << shape_text(shape);
        // zb_h1: 1F1B's peak (its first rank's) on every rank; zb_v: at most interleaved_1f1b's.
        const int peak = peak_live_passes(shape, 0);
        for (int r = 0; r < gpu.pp; ++r) {
          if (layout.keeps_1f1b_order) {
            EXPECT_EQ(peak_in_flight(passes[r]), peak) << shape_text(shape) << ", rank " << r;
          }
          EXPECT_LE(peak_in_flight(passes[r]), peak) << engine.name << ", " << shape_text(shape) << ", rank " << r;
        }
      }
}

TEST(ZeroBubbleSchedule, ReachesTheBoundsForTheGpuTimes) {
  const PassTimes& t = kGpuStages[0].times;
  const SimulatedStep h1 =
      simulate_schedule({4, 1, 16}, TRIAX_CHUNKS_INTERLEAVED, zero_bubble_passes({4, 1, 16}, zb_h1_layout(4), t), t);
  // ZB-H1's bubble: (p - 1)(F + B - W) per rank, against 1F1B's (p - 1)(F + B + W).
  const double busy = 16 * (t.forward + t.backward_input + t.backward_weight);
  EXPECT_NEAR(h1.step_time, busy + 3 * (t.forward + t.backward_input - t.backward_weight), 1e-6);
  const ZeroBubbleLayout v = zb_v_layout(4);
  const SimulatedStep zb_v = simulate_schedule({4, 2, 16}, v.placement, zero_bubble_passes({4, 2, 16}, v, t), t);
  const EngineSchedule one = shipped_schedule("1f1b", 4, 16, t);
  const double one_f_one_b = simulate_schedule(one.shape, one.placement, one.passes, t).bubble_fraction;
  EXPECT_LE(zb_v.bubble_fraction, one_f_one_b / 5);  // the goal for zb_v
}

TEST(ZeroBubbleSchedule, RefusesTooFewMicroBatchesNamingTheEngineAndTheKey) {
  const std::string problem = zero_bubble_shape_problem("zb_v", {4, 2, 3});
  EXPECT_NE(problem.find("tokens.batch_accumulation_per_replica"), std::string::npos) << problem;
  EXPECT_NE(problem.find("zb_v"), std::string::npos) << problem;
  EXPECT_NE(problem.find("at least parallelism.pp = 4"), std::string::npos) << problem;
  EXPECT_EQ(zero_bubble_shape_problem("zb_h1", {4, 1, 4}), "");
  EXPECT_THROW(zero_bubble_schedule({4, 1, 3}, zb_h1_layout(4), "zb_h1"), std::invalid_argument);
  EXPECT_THROW(shipped_schedule("zb_x", 4, 8), std::invalid_argument);
}

TEST(ScheduleSimulator, TimesOneForwardOneBackwardAsItsFormula) {
  // pp 2, 2 micro-batches, F 1, B 2, W 3 (a whole backward takes 5), transfers 0.5, by hand:
  const EngineSchedule s = shipped_schedule("1f1b", 2, 2);
  const SimulatedStep step = simulate_schedule(s.shape, s.placement, s.passes, {1.0, 2.0, 3.0, 0.5});
  // rank 0: F0 [0,1], F1 [1,2]; rank 1: F0 [1.5,2.5], BW0 [2.5,7.5], F1 [7.5,8.5], BW1 [8.5,13.5];
  // rank 0: BW0 [8,13], BW1 [14,19].
  EXPECT_DOUBLE_EQ(step.step_time, 19.0);
  EXPECT_EQ(step.busy, (std::vector<double>{12.0, 12.0}));
  EXPECT_DOUBLE_EQ(step.bubble_fraction, 1.0 - 12.0 / 19.0);
  EXPECT_EQ(step.peak_in_flight, (std::vector<int>{2, 1}));
}

}  // namespace
}  // namespace triax::plugins
