// One step's gradients averaged over the data-parallel group, then measured and clipped by the
// global norm, in the form the optimizer asks for (triax_gradient_sharding):
//
// - TRIAX_GRADIENTS_WHOLE: every parameter's gradient is all-reduced in place; each dp rank then
//   holds the whole mean gradient. The norm is reduced over the model-parallel group.
// - TRIAX_GRADIENTS_DP_SHARDED (ZeRO): each bucket is reduce-scattered so that each dp rank
//   receives only its shard (triax/zero_partition.hpp) of every parameter's mean gradient. The
//   norm is reduced over the whole world, each shard being held by one dp rank.
//
// Gradients travel in buckets of about `bucket_cap_bytes` (model.ddp_bucket_cap_mb): one
// collective per bucket instead of one per parameter. Buckets are filled in reverse parameter
// order, the order backward produces gradients in. The reduction runs once, after the last
// micro-batch's backward: the Communicator's collectives are blocking, so it does not overlap
// with backward (that needs asynchronous collectives started from gradient hooks).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "triax/abi.h"
#include "triax/parameter.hpp"
#include "triax/zero_partition.hpp"

namespace triax {

class Communicator;

class DataParallelGradients {
 public:
  // `parameters` are this rank's (the same shapes on every dp rank); `counted_in_norm[i]` says
  // whether parameter i counts in the global norm (see parameters_counted_in_norm).
  DataParallelGradients(const std::vector<NamedParameter>& parameters, triax_gradient_sharding sharding,
                        int64_t bucket_cap_bytes, int dp_rank, int dp_size, std::vector<bool> counted_in_norm);

  // After the last micro-batch: `gradients` (one per parameter, fp32 or fp64, e.g. the
  // accumulator's) averaged over the dp group: in place (WHOLE) or into this rank's shards.
  void reduce_over_data_parallel(const std::vector<at::Tensor>& gradients, Communicator& communicator);
  // Global L2 norm of the reduced gradients (0-dim fp32 tensor, not read back); with max_norm,
  // scales for_optimizer()'s gradients so it is at most max_norm. Returns the norm before clipping.
  at::Tensor clip(std::optional<double> max_norm, Communicator& communicator);
  // What the optimizer's step gets: the whole mean gradients, or this rank's 1-D shards of them.
  const std::vector<at::Tensor>& for_optimizer() const { return for_optimizer_; }

  triax_gradient_sharding sharding() const { return sharding_; }
  // Parameter indices of each bucket, in the order their collectives run.
  std::vector<std::vector<size_t>> bucket_members() const;
  // One line for the start-up log.
  std::string describe() const;

 private:
  struct Bucket {
    std::vector<size_t> members;
    std::vector<int64_t> offsets;  // of each member in the flat bucket (WHOLE) or a rank's segment
    int64_t elements = 0;          // flat bucket (WHOLE) or one rank's segment (DP_SHARDED)
    at::ScalarType dtype = at::kFloat;
    at::Tensor shards;  // DP_SHARDED: this rank's segment after the reduce-scatter
  };

  void plan_buckets(int64_t bucket_cap_bytes);
  void all_reduce_bucket(const Bucket& bucket, const std::vector<at::Tensor>& gradients, Communicator& communicator);
  void reduce_scatter_bucket(Bucket& bucket, const std::vector<at::Tensor>& gradients, Communicator& communicator);

  std::vector<NamedParameter> parameters_;
  triax_gradient_sharding sharding_;
  int dp_rank_, dp_size_;
  int64_t bucket_cap_bytes_;
  std::vector<bool> counted_in_norm_;
  std::vector<ZeroShard> shards_;  // of each parameter, for this dp rank
  std::vector<Bucket> buckets_;
  std::vector<at::Tensor> for_optimizer_;
};

}  // namespace triax
