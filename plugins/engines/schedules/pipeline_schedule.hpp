// A pipeline schedule as data: the passes each pipeline rank runs, in order, and the steps (the
// passes with the transfers between ranks placed among them). The engines run steps through
// PipelineStage; the simulator (schedule_simulator.hpp) times passes; tests check both.
//
// Plain C++ without LibTorch, so that tests and `triax inspect schedule` use the engines' own
// schedules without building a model.
#pragma once

#include <vector>

#include "triax/abi.h"

namespace triax::plugins {

struct ScheduleShape {
  int pp_size = 1;
  int chunks = 1;         // model chunks per pipeline rank
  int micro_batches = 1;  // per optimizer step
  int virtual_stages() const { return pp_size * chunks; }
};

// What one pass does with one micro-batch through one chunk. Backward is the whole backward;
// zero-bubble schedules split it into BackwardInput (B: the gradients of the inputs, which the
// previous stage waits for) and BackwardWeight (W: the weights' gradients, which nothing waits for).
enum class PassKind { Forward, Backward, BackwardInput, BackwardWeight };

struct Pass {
  PassKind kind = PassKind::Forward;
  int chunk = 0;
  int micro_batch = 0;
  bool forward() const { return kind == PassKind::Forward; }
  // Whether the pass sends the gradient of its input back (Backward or BackwardInput).
  bool backpropagates_input() const { return kind == PassKind::Backward || kind == PassKind::BackwardInput; }
  // Whether the micro-batch's activations on this chunk are freed after it (Backward or BackwardWeight).
  bool frees_activations() const { return kind == PassKind::Backward || kind == PassKind::BackwardWeight; }
  bool operator==(const Pass& other) const {
    return kind == other.kind && chunk == other.chunk && micro_batch == other.micro_batch;
  }
};

// One thing a rank does. The transfers name their peer's pipeline rank (this rank's own for the
// hand-over between two chunks of one rank, as the V placement has at its turn).
struct ScheduleStep {
  enum class Kind {
    ReceiveInput,
    Forward,
    SendOutput,
    ReceiveGradient,
    Backward,
    SendGradient,
    BackwardInput,
    BackwardWeight
  };
  Kind kind = Kind::Forward;
  int chunk = 0;
  int micro_batch = 0;
  int peer = -1;  // transfers only
  bool is_send() const { return kind == Kind::SendOutput || kind == Kind::SendGradient; }
  bool is_receive() const { return kind == Kind::ReceiveInput || kind == Kind::ReceiveGradient; }
};

// The step that runs `pass`.
ScheduleStep::Kind step_kind_of(PassKind kind);

// The most (chunk, micro-batch) pairs whose activations are alive at once in `passes`: counted
// from each forward until the pass that frees them.
int peak_in_flight(const std::vector<Pass>& passes);

// Runs every rank's items in order, each rank as far as `try_run(rank, item)` lets it, round after
// round until no rank can go on, as ranks running at once would. Returns the pipeline rank of the
// first that could not run all its items, or -1.
template <class Item, class TryRun>
int run_ranks_in_order(const std::vector<std::vector<Item>>& items, TryRun&& try_run) {
  std::vector<size_t> next(items.size(), 0);
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (size_t r = 0; r < items.size(); ++r)
      for (; next[r] < items[r].size() && try_run(static_cast<int>(r), items[r][next[r]]); ++next[r]) progressed = true;
  }
  for (size_t r = 0; r < items.size(); ++r)
    if (next[r] != items[r].size()) return static_cast<int>(r);
  return -1;
}

}  // namespace triax::plugins
