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

  static TensorParallel of(const ModelContext& context) {
    return {context.tp_rank, context.tp_size, context.tp_mode, context.host};
  }
  // Rows [offset, offset + count) of a dimension of `total` split evenly over the group.
  int64_t shard_size(int64_t total, const char* what) const;
  int64_t shard_offset(int64_t total) const { return rank * (total / size); }
};

}  // namespace triax
