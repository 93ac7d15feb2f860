// ZeRO-3 parameter sharding (optimizer.zero_stage 3): every parameter is kept as this rank's 1-D
// shard of its flattened tensor-parallel shard (triax/zero_partition.hpp, over the parameter's
// gradient group: dp, or edp for experts); the whole tensors exist only while a unit of modules
// (a decoder layer, the embedding, the head) runs.
//
// Zero3Parameters makes the shards from a model's initialised parameters and frees the whole
// tensors; the host then sees the shards (TRIAX_PARAM_ZERO3_SHARD) as the model's parameters, and
// the optimizer updates them in place. A Zero3Unit gathers the shards of its modules' parameters
// into one flat buffer per (gradient group, dtype), points the modules' parameters at the
// gathered values, frees them again, and reduce-scatters gradients of the whole parameters into
// gradients of the shards. zero3_layer.hpp runs a unit's block around these.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "triax/host.hpp"
#include "triax/parameter.hpp"
#include "triax/zero_partition.hpp"

namespace triax {

struct ModelContext;

class Zero3Unit {
 public:
  struct Member {
    at::Tensor whole;  // the module's parameter; its storage is empty outside gather()/release()
    at::Tensor shard;  // this rank's 1-D shard: a leaf the host accumulates gradients into
    triax_group group = TRIAX_GROUP_DP;
    int ranks = 1;               // of the group
    std::vector<int64_t> shape;  // the whole parameter's (tensor-parallel shard's) shape
    int64_t numel = 0;
    ZeroShard range;  // this rank's elements of it, flattened
  };

  Zero3Unit(std::vector<Member> members, Host host, int dp_size);
  ~Zero3Unit();
  Zero3Unit(const Zero3Unit&) = delete;
  Zero3Unit& operator=(const Zero3Unit&) = delete;

  // Posts the all-gathers without waiting (the next unit's prefetch); gather() finishes them.
  void start_gather();
  // The whole parameters, in the modules' own tensors, until release().
  void gather();
  void release();
  // Gradients of the whole parameters (undefined: not used, zero) summed over each member's group
  // and divided by dp, this rank's shard of each: the gradients of shards().
  std::vector<at::Tensor> reduce_scatter(const std::vector<at::Tensor>& whole_gradients) const;

  std::vector<at::Tensor> wholes() const;
  std::vector<at::Tensor> shards() const;

 private:
  // The members of one (group, dtype), gathered in one flat buffer: every rank contributes
  // [chunk of m1, chunk of m2, ...], each chunk padded to ceil(n / group size) elements.
  struct Bucket {
    triax_group group = TRIAX_GROUP_DP;
    int ranks = 1;
    std::vector<size_t> members;
    std::vector<int64_t> offsets;  // of each member's chunk within one rank's segment
    int64_t segment = 0;
    at::Tensor send;                             // this rank's segment while a gather is in flight
    at::Tensor gathered;                         // [ranks * segment] while started or gathered
    std::unique_ptr<PendingCollective> pending;  // a started gather
  };

  std::vector<Member> members_;
  std::vector<Bucket> buckets_;
  Host host_;
  int dp_size_ = 1;
  bool gathered_ = false;
};

class Zero3Parameters {
 public:
  // Replaces every parameter of `table` (initialised, whole) by this rank's shard, flagged
  // TRIAX_PARAM_ZERO3_SHARD, and frees the whole tensors.
  Zero3Parameters(std::vector<NamedParameter>& table, const ModelContext& context);

  // The unit of these module parameters (whole tensors as the modules hold them; a tied one may
  // belong to several units). Every one must be a parameter of the table.
  std::shared_ptr<Zero3Unit> unit(const std::vector<at::Tensor>& module_parameters) const;

 private:
  std::vector<Zero3Unit::Member> members_;  // in table order
  Host host_;
  int dp_size_ = 1;
};

}  // namespace triax
