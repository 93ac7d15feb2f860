#include "zero1_parameters.hpp"

#include <ATen/ATen.h>

#include "triax/error.hpp"

namespace triax::plugins {

namespace {

// The elements `range` of the parameter, with their fp32 master: fp32 parameters are their own
// masters (the update writes straight into them).
ParameterShard shard_of(const OptimizerParam& p, ZeroShard range, const std::string& optimizer) {
  if (!p.param.is_contiguous())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, optimizer + ": parameter '" + p.name +
                                                  "' is not contiguous; its shard is a range of its elements");
  ParameterShard shard;
  shard.name = p.name;
  shard.param = p.param;
  shard.group = p.gradient_group;
  shard.range = range;
  shard.live = p.param.detach().view(-1).narrow(0, range.offset, range.length);
  shard.own_master = p.param.scalar_type() != at::kFloat;
  shard.master = shard.own_master ? shard.live.to(at::kFloat).clone() : shard.live;
  shard.weight_decay = p.weight_decay;
  shard.lr_scale = p.lr_scale;
  return shard;
}

}  // namespace

ParameterShard whole_parameter_shard(const OptimizerParam& param, const std::string& optimizer) {
  return shard_of(param, zero_shard(param.param.numel(), 0, 1), optimizer);
}

Zero1Parameters::Zero1Parameters(const OptimizerContext& context, const std::vector<OptimizerParam>& params,
                                 const std::string& optimizer)
    : optimizer_(optimizer), host_(context.host), dp_rank_(context.dp_rank), dp_size_(context.dp_size) {
  if (dp_size_ < 1 || dp_rank_ < 0 || dp_rank_ >= dp_size_)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, optimizer_ + ": dp rank " + std::to_string(dp_rank_) + " of " +
                                                  std::to_string(dp_size_) + " is not a rank of the dp group");
  if (dp_size_ > 1 && (!host_.valid() || host_.size(TRIAX_GROUP_DP) != dp_size_))
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, optimizer_ + ": dp size " + std::to_string(dp_size_) +
                                                  " needs the host's dp group of that size to all-gather parameters");
  for (const OptimizerParam& p : params) {
    if (!p.param.is_contiguous())
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, optimizer_ + ": parameter '" + p.name +
                                                    "' is not contiguous; its dp shard is a range of its elements");
    const ZeroShard range = zero_shard(p.param.numel(), group_rank(p.gradient_group), group_size(p.gradient_group));
    shards_.push_back(shard_of(p, range, optimizer_));
  }
  plan_gather_buckets();
}

void Zero1Parameters::check_gradients(const std::vector<at::Tensor>& grads) const {
  if (grads.size() != shards_.size())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, optimizer_ + " step: " + std::to_string(grads.size()) +
                                                  " gradient shards for " + std::to_string(shards_.size()) +
                                                  " parameters");
  for (size_t i = 0; i < shards_.size(); ++i) {
    const ParameterShard& shard = shards_[i];
    if (grads[i].numel() != shard.range.length)
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, optimizer_ + " step: the gradient of '" + shard.name + "' holds " +
                                                    std::to_string(grads[i].numel()) + " elements; rank " +
                                                    std::to_string(group_rank(shard.group)) + " of its " +
                                                    std::to_string(group_size(shard.group)) + " owns " +
                                                    std::to_string(shard.range.length) + " (elements from " +
                                                    std::to_string(shard.range.offset) + ")");
  }
}

int64_t Zero1Parameters::master_bytes() const {
  int64_t bytes = 0;
  for (const ParameterShard& shard : shards_)
    if (shard.own_master) bytes += static_cast<int64_t>(shard.master.nbytes());
  return bytes;
}

void Zero1Parameters::plan_gather_buckets() {
  GatherBucket current;
  at::ScalarType current_dtype = at::kFloat;
  auto close = [&] {
    if (!current.members.empty()) buckets_.push_back(std::move(current));
    current = GatherBucket{};
  };
  for (size_t i = 0; i < shards_.size(); ++i) {
    const ParameterShard& shard = shards_[i];
    if (shard.range.chunk == 0) continue;        // an empty parameter has nothing to gather
    if (group_size(shard.group) == 1) continue;  // the one copy is this rank's
    const at::ScalarType dtype = shard.param.scalar_type();
    const int64_t ranks = group_size(shard.group);
    const int64_t bytes = ranks * shard.range.chunk * static_cast<int64_t>(shard.param.element_size());
    const int64_t current_bytes = ranks * current.segment * static_cast<int64_t>(c10::elementSize(current_dtype));
    if (!current.members.empty() &&
        (dtype != current_dtype || shard.group != current.group || current_bytes + bytes > kGatherBucketBytes))
      close();
    current_dtype = dtype;
    current.group = shard.group;
    current.members.push_back(i);
    current.offsets.push_back(current.segment);
    current.segment += shard.range.chunk;
  }
  close();
}

void Zero1Parameters::all_gather_parameters() const {
  at::NoGradGuard no_grad;
  for (const GatherBucket& bucket : buckets_) {
    const at::Tensor& first = shards_[bucket.members.front()].param;
    at::Tensor send = at::zeros({bucket.segment}, first.options().requires_grad(false));
    for (size_t k = 0; k < bucket.members.size(); ++k) {
      const ParameterShard& shard = shards_[bucket.members[k]];
      send.narrow(0, bucket.offsets[k], shard.range.length).copy_(shard.live);
    }
    const int64_t ranks = group_size(bucket.group);
    at::Tensor gathered = at::empty({ranks * bucket.segment}, send.options());
    host_.all_gather(bucket.group, gathered, send);
    at::Tensor by_rank = gathered.view({ranks, bucket.segment});
    for (size_t k = 0; k < bucket.members.size(); ++k) {
      const ParameterShard& shard = shards_[bucket.members[k]];
      const int64_t numel = shard.param.numel();
      at::Tensor whole = by_rank.narrow(1, bucket.offsets[k], shard.range.chunk).reshape({-1}).narrow(0, 0, numel);
      shard.param.detach().view(-1).copy_(whole);
    }
  }
}

}  // namespace triax::plugins
