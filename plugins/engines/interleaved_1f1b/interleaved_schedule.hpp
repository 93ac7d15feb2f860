// The interleaved 1F1B schedule (Megatron-LM's "virtual pipeline"), as data: each pipeline rank
// holds `chunks` model chunks, chunk c of rank r being virtual stage c * pp + r, and runs the
// forward and backward passes of every (chunk, micro-batch) in Megatron's order: warm-up
// forwards, then one forward and one backward in turn, then the remaining backwards.
//
// The transfers between ranks are placed by simulating every rank at once: a rank sends an
// activation or a gradient only at the moment its receiver asks for it, so that in each rank's
// list every send meets the matching receive of its peer, in the same order on both sides. The
// schedule therefore cannot deadlock even when a send blocks until it is received (the pipeline
// group is a ring here: the last rank feeds chunk c + 1 of rank 0).
//
// Plain C++ without LibTorch, so that tests can check the schedule for many shapes quickly.
#pragma once

#include <string>
#include <vector>

namespace triax::plugins {

struct ScheduleShape {
  int pp_size = 1;
  int chunks = 1;         // model chunks per pipeline rank
  int micro_batches = 1;  // per optimizer step
  int virtual_stages() const { return pp_size * chunks; }
};

// A forward or backward pass of one micro-batch through one chunk.
struct Pass {
  bool forward = true;
  int chunk = 0;
  int micro_batch = 0;
  bool operator==(const Pass& other) const {
    return forward == other.forward && chunk == other.chunk && micro_batch == other.micro_batch;
  }
};

// One thing a rank does. The transfers name their peer's pipeline rank.
struct ScheduleStep {
  enum class Kind { ReceiveInput, Forward, SendOutput, ReceiveGradient, Backward, SendGradient };
  Kind kind = Kind::Forward;
  int chunk = 0;
  int micro_batch = 0;
  int peer = -1;  // transfers only
  bool is_send() const { return kind == Kind::SendOutput || kind == Kind::SendGradient; }
  bool is_receive() const { return kind == Kind::ReceiveInput || kind == Kind::ReceiveGradient; }
};

// Why a shape cannot be scheduled, naming the key to change; empty when it can.
std::string schedule_shape_problem(const ScheduleShape& shape);

// Forwards before the first backward on `pp_rank` (Megatron's count, capped at the total).
int warm_up_passes(const ScheduleShape& shape, int pp_rank);

// The passes of `pp_rank`, in order.
std::vector<Pass> interleaved_passes(const ScheduleShape& shape, int pp_rank);

// The most (chunk, micro-batch) pairs whose activations are alive at once on `pp_rank`.
int peak_live_passes(const ScheduleShape& shape, int pp_rank);

// Every rank's steps: its passes in order, with the transfers placed as described above.
std::vector<std::vector<ScheduleStep>> interleaved_schedule(const ScheduleShape& shape);

}  // namespace triax::plugins
