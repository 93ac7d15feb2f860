// ZeRO-1's view of an optimizer's parameters, shared by the zero1_adamw and zero1_muon plugins:
// each parameter's shard on this rank over its gradient group (triax/zero_partition.hpp: dp for
// dense parameters, edp for expert shards), with an fp32 master of that shard, and the all-gather
// that puts the updated shards back together on every rank of the group after a step.
//
// The all-gather goes in buckets of parameters of one dtype and group, each rank's chunks padded
// to ceil(n / group size) elements, in the parameters' own dtype (bf16 parameters move half the
// bytes of fp32 masters).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "triax/optimizer.hpp"
#include "triax/zero_partition.hpp"

namespace triax::plugins {

// A parameter's elements that one rank updates: its ZeRO-1 shard, or all of it.
struct ParameterShard {
  std::string name;
  triax_group group = TRIAX_GROUP_DP;  // sharded and gathered over it
  at::Tensor param;   // the live parameter, whole
  ZeroShard range;    // this rank's elements of it
  at::Tensor live;    // those elements, a view into param
  at::Tensor master;  // fp32: `live` itself for fp32 parameters, else its own copy
  bool own_master = false;
  double weight_decay = 0.0;
  double lr_scale = 1.0;
};

// The whole parameter as one shard, for optimizers that get whole gradients. Refuses a parameter
// that is not contiguous (the shard is a range of its elements).
ParameterShard whole_parameter_shard(const OptimizerParam& param, const std::string& optimizer);

class Zero1Parameters {
 public:
  // Bytes of one all-gather's output at most (a single larger parameter goes alone).
  static constexpr int64_t kGatherBucketBytes = 32ll << 20;

  // `optimizer` names the plugin in messages. Refuses a dp rank outside its group, a host without
  // the dp group, and a parameter that is not contiguous.
  Zero1Parameters(const OptimizerContext& context, const std::vector<OptimizerParam>& params,
                  const std::string& optimizer);

  const std::vector<ParameterShard>& shards() const { return shards_; }
  // The ranks of a parameter's gradient group: dp from the context, edp (and the cp-widened
  // groups) from the host.
  int group_rank(triax_group group) const { return group == TRIAX_GROUP_DP ? dp_rank_ : host_.rank(group); }
  int group_size(triax_group group) const { return group == TRIAX_GROUP_DP ? dp_size_ : host_.size(group); }

  // Refuses gradients that are not this rank's shards of the parameters, in order.
  void check_gradients(const std::vector<at::Tensor>& grads) const;
  // Every rank's updated shards into every rank's parameters.
  void all_gather_parameters() const;
  // Bytes of the masters that are copies (fp32 parameters are their own).
  int64_t master_bytes() const;

 private:
  // Parameters whose padded chunks travel in one all-gather: every rank contributes
  // [chunk of p1, chunk of p2, ...] (each padded to its chunk size), so the output is rank-major.
  struct GatherBucket {
    triax_group group = TRIAX_GROUP_DP;
    std::vector<size_t> members;
    std::vector<int64_t> offsets;  // of each member's chunk within one rank's segment
    int64_t segment = 0;           // elements of one rank's segment
  };

  void plan_gather_buckets();

  std::string optimizer_;
  Host host_;
  int dp_rank_ = 0, dp_size_ = 1;
  std::vector<ParameterShard> shards_;
  std::vector<GatherBucket> buckets_;
};

}  // namespace triax::plugins
