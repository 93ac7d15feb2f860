// One step's gradients averaged over the data-parallel replicas, then measured and clipped by the
// global norm, in the form the optimizer asks for (triax_gradient_sharding):
//
// - TRIAX_GRADIENTS_WHOLE: every parameter's gradient is all-reduced in place over its gradient
//   group; each rank of it then holds the whole mean gradient.
// - TRIAX_GRADIENTS_DP_SHARDED (ZeRO): each bucket is reduce-scattered over its gradient group so
//   that each rank receives only its shard (triax/zero_partition.hpp, over that group) of every
//   parameter's mean gradient.
// - TRIAX_GRADIENTS_PARAMETERS_SHARDED (ZeRO-3): the parameters are the model's shards, whose
//   gradients the model's blocks already reduce-scattered over the group and divided by dp during
//   each backward: nothing is left to reduce here, only the norm.
//
// A parameter's gradient group (ParameterSpec::gradient_group) is dp, or edp for an expert shard;
// with context parallelism dp_cp or edp_cp (the cp ranks hold the same parameters, and each
// computed its sequences' slice of the gradient), and dp below means dp x cp.
// Either way the result is the sum over the group divided by dp: an expert's gradient arrives
// already summed over its ep group (through the all-to-all's backward), so that makes it the mean
// over every dp rank's contribution, as for dense parameters. The norm is all-reduced over the
// world, each element counted by one owner (ReplicaOwnership).
//
// Gradients travel in buckets of about `bucket_cap_bytes` (model.ddp_bucket_cap_mb), one per
// (dtype, group) run: one collective per bucket instead of one per parameter. Buckets are filled
// in reverse parameter order, the order backward produces gradients in. The reduction runs once
// per step, over the gradients summed over every micro-batch. With overlap_with_backward (backends
// with asynchronous collectives), it overlaps the last micro-batch's backward: hooks on the
// parameters see each gradient become final and start a bucket's collective as soon as all its
// members are, in bucket order (the same on every rank of a group); reduce_over_data_parallel
// then starts the rest (buckets with a gradient still to come, or summed over pipeline stages
// after the backward) and waits for all. With several model chunks per pipeline rank (interleaved
// engines), each parameter's gradient is final after the last micro-batch's backward through its
// own chunk (set_parameter_chunks). The result is the same, bit for bit, as reducing after the
// backward.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "triax/abi.h"
#include "triax/parallel/gradient_norm.hpp"
#include "triax/parallel/replica_ownership.hpp"
#include "triax/parameter.hpp"
#include "triax/zero_partition.hpp"

namespace triax {

class Communicator;
class PendingOperation;

class DataParallelGradients {
 public:
  // `parameters` are this rank's (the same shapes on every rank of each one's gradient group);
  // `groups` this rank's place in dp and edp; `counted_in_norm[i]` says whether parameter i counts
  // in the global norm (ReplicaOwnership::counted_in_norm).
  DataParallelGradients(const std::vector<NamedParameter>& parameters, triax_gradient_sharding sharding,
                        int64_t bucket_cap_bytes, ReplicaGroups groups, std::vector<bool> counted_in_norm);

  ~DataParallelGradients();
  DataParallelGradients(const DataParallelGradients&) = delete;
  DataParallelGradients& operator=(const DataParallelGradients&) = delete;

  // Registers the hooks that start buckets during the last micro-batch's backward.
  // `final_gradient(k)` hands over parameter k's gradient of the step once its last micro-batch's
  // part has arrived (the accumulator's: the tensor later passed to reduce_over_data_parallel);
  // `summed_after_backward[k]`: the gradient still changes after the backward (tied over pipeline
  // stages), so its bucket starts in reduce_over_data_parallel.
  void overlap_with_backward(std::function<at::Tensor(size_t)> final_gradient, std::vector<bool> summed_after_backward,
                             Communicator& communicator);
  // Which model chunk holds each parameter, when the engine runs several per pipeline rank (all
  // chunk 0 until called). A parameter's gradient is final after the last micro-batch's
  // backward through its own chunk.
  void set_parameter_chunks(std::vector<int> chunk_of_parameter, int chunk_count);
  // Before a step's first micro-batch; then after each micro-batch's backward through `chunk`.
  // The hooks act during the backward of micro-batch `micro_batches - 1` through each chunk (the
  // engine's last there).
  void begin_step(int64_t micro_batches);
  void after_backward(int chunk = 0);
  // Called by the parameters' hooks: parameter k's gradient of this micro-batch is accumulated.
  void gradient_ready(size_t k);
  // Buckets whose collective started during the latest step's backward.
  int64_t buckets_started_in_backward() const { return started_in_backward_; }

  // After the last micro-batch: `gradients` (one per parameter, e.g. the accumulator's) averaged
  // over their gradient groups: in place (WHOLE) or into this rank's fp32 shards. A gradient in
  // the parameter's low-precision dtype is reduced from an fp32 copy, and for_optimizer() then
  // holds its fp32 mean instead (WHOLE, dp > 1).
  void reduce_over_data_parallel(const std::vector<at::Tensor>& gradients, Communicator& communicator);
  // Global L2 norm of the reduced gradients and the clipping coefficient for max_norm (0-dim fp32
  // tensors, not read back); the gradients are not scaled.
  GlobalNorm norm(std::optional<double> max_norm, Communicator& communicator);
  // norm(), then for_optimizer()'s gradients scaled in place so their norm is at most max_norm.
  // Returns the norm before clipping.
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
    triax_group group = TRIAX_GROUP_DP;  // its members' gradient group
    at::Tensor shards;  // DP_SHARDED: this rank's segment after the reduce-scatter
  };

  // A bucket's collective in flight.
  struct InFlight {
    size_t bucket = 0;
    std::unique_ptr<PendingOperation> operation;
    at::Tensor flat;                  // WHOLE: the flat fp32 copy reduced (undefined: a bucket of one)
    std::vector<at::Tensor> members;  // WHOLE: the gradients it writes back to (those in fp32)
  };

  void plan_buckets(int64_t bucket_cap_bytes);
  bool reduces() const {
    return sharding_ == TRIAX_GRADIENTS_DP_SHARDED || (sharding_ == TRIAX_GRADIENTS_WHOLE && groups_.replicas() > 1);
  }
  InFlight start_bucket(size_t b, const std::vector<at::Tensor>& gradients, Communicator& communicator);
  void finish_bucket(InFlight& flight);
  void start_ready_buckets();
  void release_hooks();

  std::function<at::Tensor(size_t)> final_gradient_;  // set by overlap_with_backward
  Communicator* overlap_communicator_ = nullptr;
  std::vector<bool> held_;      // of each bucket: starts only after the backward
  std::vector<int> bucket_of_;  // of each parameter; -1 for empty ones
  std::vector<int> chunk_of_;   // of each parameter; empty: all in chunk 0
  int chunk_count_ = 1;
  std::vector<bool> armed_;              // of each chunk: during its last micro-batch's backward
  std::vector<int64_t> backwards_done_;  // of each chunk, this step
  int64_t micro_batches_ = 0;
  std::vector<bool> ready_;      // of each parameter, this step
  std::vector<size_t> arrived_;  // of each bucket: members ready
  size_t next_bucket_ = 0;       // buckets before it have started
  std::vector<InFlight> in_flight_;
  std::vector<at::Tensor> started_gradients_;  // the tensors the started buckets reduce
  int64_t started_in_backward_ = 0;

  std::vector<NamedParameter> parameters_;
  triax_gradient_sharding sharding_;
  ReplicaGroups groups_;
  int64_t bucket_cap_bytes_;
  std::vector<bool> counted_in_norm_;
  std::vector<ZeroShard> shards_;  // of each parameter, for this rank of its gradient group
  std::vector<Bucket> buckets_;
  std::vector<at::Tensor> for_optimizer_;
};

}  // namespace triax
