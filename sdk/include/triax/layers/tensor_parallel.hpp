// Where a layer sits in its tensor-parallel group.
#pragma once

#include "triax/host.hpp"
#include "triax/model.hpp"

namespace triax {

struct TensorParallel {
  int rank = 0;
  int size = 1;
  TpMode mode = TpMode::AllReduce;
  Host host;
  bool overlap_communication = false;  // ModelContext::tp_linear_async_communication

  static TensorParallel of(const ModelContext& context) {
    return {context.tp_rank, context.tp_size, context.tp_mode, context.host, context.tp_linear_async_communication};
  }
  // This rank's share of a dimension of `total` split evenly over the group; `what` names the
  // dimension in the error raised when it does not divide.
  int64_t shard_size(int64_t total, const char* what) const;
  // Where this rank's share starts.
  int64_t shard_offset(int64_t total) const { return rank * (total / size); }
};

}  // namespace triax
