// ZeRO stage 1 AdamW: each data-parallel rank keeps fp32 master weights and both Adam moments for
// its shard of every parameter only (triax/zero_partition.hpp), so optimizer state per rank is
// about 1/dp of adamw's.
//
// Each parameter is sharded over its own gradient group (OptimizerParam::gradient_group): dp for
// dense parameters, edp for expert shards, whose copies only the edp ranks share.
//
// step() receives this rank's shard of each averaged gradient (the host reduce-scatters them into
// fp32 shards), updates its shard with the same AdamW arithmetic as the `adamw` plugin
// (adamw_update, which also applies the clipping coefficient and writes the shard into the
// parameter), and all-gathers the parameters over their group so every replica holds the same
// values again. The all-gather goes in buckets of parameters of one dtype and
// group, each rank's chunks padded to ceil(n / group size) elements, in the parameters' own dtype
// (bf16 parameters move half the bytes of fp32 masters).
#include <ATen/ATen.h>

#include "adamw_update.hpp"
#include "triax/plugin.hpp"
#include "triax/zero_partition.hpp"

namespace triax::plugins {

class Zero1AdamW final : public Optimizer {
 public:
  static constexpr triax_gradient_sharding kGradientSharding = TRIAX_GRADIENTS_DP_SHARDED;

  // Bytes of one all-gather's output at most (a single larger parameter goes alone).
  static constexpr int64_t kGatherBucketBytes = 32ll << 20;

  static std::unique_ptr<Zero1AdamW> create(const OptimizerContext& context, std::vector<OptimizerParam> params) {
    return std::make_unique<Zero1AdamW>(AdamWSettings::read(context.optimizer), context, std::move(params));
  }

  Zero1AdamW(AdamWSettings settings, const OptimizerContext& context, std::vector<OptimizerParam> params)
      : update_(settings), host_(context.host), dp_rank_(context.dp_rank), dp_size_(context.dp_size) {
    if (dp_size_ < 1 || dp_rank_ < 0 || dp_rank_ >= dp_size_)
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "zero1_adamw: dp rank " + std::to_string(dp_rank_) + " of " +
                                                    std::to_string(dp_size_) + " is not a rank of the dp group");
    if (dp_size_ > 1 && (!host_.valid() || host_.size(TRIAX_GROUP_DP) != dp_size_))
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "zero1_adamw: dp size " + std::to_string(dp_size_) +
                                                    " needs the host's dp group of that size to all-gather parameters");
    for (OptimizerParam& p : params) {
      if (!p.param.is_contiguous())
        throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "zero1_adamw: parameter '" + p.name +
                                                      "' is not contiguous; its dp shard is a range of its elements");
      Shard shard;
      shard.param = p.param;
      shard.group = p.gradient_group;
      shard.range = zero_shard(p.param.numel(), group_rank(shard.group), group_size(shard.group));
      shard.live = p.param.detach().view(-1).narrow(0, shard.range.offset, shard.range.length);
      // fp32 parameters are their own masters: the update writes straight into the shard.
      shard.own_master = p.param.scalar_type() != at::kFloat;
      shard.master = shard.own_master ? shard.live.to(at::kFloat).clone() : shard.live;
      if (shard.range.length > 0)
        shard.slot = static_cast<int64_t>(
            update_.add(shard.master, p.weight_decay, p.lr_scale, shard.own_master ? shard.live : at::Tensor()));
      shard.name = std::move(p.name);
      shards_.push_back(std::move(shard));
    }
    plan_gather_buckets();
  }

  void step(const std::vector<at::Tensor>& grads, double lr) override { step_scaled(grads, lr, at::Tensor()); }

  void step_scaled(const std::vector<at::Tensor>& grads, double lr, const at::Tensor& grad_scale) override {
    if (grads.size() != shards_.size())
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "zero1_adamw step: " + std::to_string(grads.size()) +
                                                    " gradient shards for " + std::to_string(shards_.size()) +
                                                    " parameters");
    at::NoGradGuard no_grad;
    std::vector<at::Tensor> shard_grads;
    shard_grads.reserve(update_.size());
    for (size_t i = 0; i < shards_.size(); ++i) {
      const Shard& shard = shards_[i];
      if (grads[i].numel() != shard.range.length)
        throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "zero1_adamw step: the gradient of '" + shard.name + "' holds " +
                                                      std::to_string(grads[i].numel()) + " elements; rank " +
                                                      std::to_string(group_rank(shard.group)) + " of its " +
                                                      std::to_string(group_size(shard.group)) +
                                                      " owns " + std::to_string(shard.range.length) +
                                                      " (elements from " + std::to_string(shard.range.offset) + ")");
      if (shard.slot >= 0) shard_grads.push_back(grads[i].view(-1));
    }
    update_.step(shard_grads, lr, grad_scale);  // also rounds each master into its shard of the parameter
    all_gather_parameters();
  }

  // Each rank lists its shard's state: elementwise entries start at the shard's first element.
  std::vector<OptimizerState> state() override {
    std::vector<OptimizerState> out;
    for (size_t i = 0; i < shards_.size(); ++i) {
      const Shard& shard = shards_[i];
      if (shard.slot < 0) continue;
      const auto index = static_cast<int64_t>(i);
      AdamWUpdate::SlotState slot = update_.slot_state(static_cast<size_t>(shard.slot));
      if (shard.own_master) out.push_back({index, "master", shard.master, shard.range.offset, false});
      out.push_back({index, "exp_avg", slot.exp_avg, shard.range.offset, false});
      out.push_back({index, "exp_avg_sq", slot.exp_avg_sq, shard.range.offset, false});
      out.push_back({index, "step", slot.step, 0, true});
    }
    return out;
  }

  void state_loaded() override { update_.state_loaded(); }

  int64_t state_bytes() const override {
    int64_t bytes = update_.moment_bytes();
    for (const Shard& shard : shards_)
      if (shard.own_master) bytes += static_cast<int64_t>(shard.master.nbytes());
    return bytes;
  }

 private:
  struct Shard {
    std::string name;
    triax_group group = TRIAX_GROUP_DP;  // sharded and gathered over it
    at::Tensor param;   // the live parameter, whole
    ZeroShard range;    // this rank's elements of it
    at::Tensor live;    // those elements, a view into param
    at::Tensor master;  // fp32: `live` itself for fp32 parameters, else its own copy
    bool own_master = false;
    int64_t slot = -1;  // in update_, or -1 for an empty shard
  };

  // Parameters whose padded chunks travel in one all-gather: every rank contributes
  // [chunk of p1, chunk of p2, ...] (each padded to its chunk size), so the output is rank-major.
  struct GatherBucket {
    triax_group group = TRIAX_GROUP_DP;
    std::vector<size_t> members;
    std::vector<int64_t> offsets;  // of each member's chunk within one rank's segment
    int64_t segment = 0;           // elements of one rank's segment
  };

  // The ranks of a parameter's gradient group: dp from the context, edp from the host.
  int group_rank(triax_group group) const { return group == TRIAX_GROUP_DP ? dp_rank_ : host_.rank(group); }
  int group_size(triax_group group) const { return group == TRIAX_GROUP_DP ? dp_size_ : host_.size(group); }

  void plan_gather_buckets() {
    GatherBucket current;
    at::ScalarType current_dtype = at::kFloat;
    auto close = [&] {
      if (!current.members.empty()) buckets_.push_back(std::move(current));
      current = GatherBucket{};
    };
    for (size_t i = 0; i < shards_.size(); ++i) {
      const Shard& shard = shards_[i];
      if (shard.range.chunk == 0) continue;  // an empty parameter has nothing to gather
      if (group_size(shard.group) == 1) continue;  // the one copy is this rank's
      const at::ScalarType dtype = shard.param.scalar_type();
      const int64_t ranks = group_size(shard.group);
      const int64_t bytes = ranks * shard.range.chunk * static_cast<int64_t>(shard.param.element_size());
      const int64_t current_bytes = ranks * current.segment * static_cast<int64_t>(c10::elementSize(current_dtype));
      if (!current.members.empty() && (dtype != current_dtype || shard.group != current.group ||
                                       current_bytes + bytes > kGatherBucketBytes))
        close();
      current_dtype = dtype;
      current.group = shard.group;
      current.members.push_back(i);
      current.offsets.push_back(current.segment);
      current.segment += shard.range.chunk;
    }
    close();
  }

  void all_gather_parameters() {
    for (const GatherBucket& bucket : buckets_) {
      const at::Tensor& first = shards_[bucket.members.front()].param;
      at::Tensor send = at::zeros({bucket.segment}, first.options().requires_grad(false));
      for (size_t k = 0; k < bucket.members.size(); ++k) {
        const Shard& shard = shards_[bucket.members[k]];
        send.narrow(0, bucket.offsets[k], shard.range.length).copy_(shard.live);
      }
      const int64_t ranks = group_size(bucket.group);
      at::Tensor gathered = at::empty({ranks * bucket.segment}, send.options());
      host_.all_gather(bucket.group, gathered, send);
      at::Tensor by_rank = gathered.view({ranks, bucket.segment});
      for (size_t k = 0; k < bucket.members.size(); ++k) {
        const Shard& shard = shards_[bucket.members[k]];
        const int64_t numel = shard.param.numel();
        at::Tensor whole = by_rank.narrow(1, bucket.offsets[k], shard.range.chunk).reshape({-1}).narrow(0, 0, numel);
        shard.param.detach().view(-1).copy_(whole);
      }
    }
  }

  AdamWUpdate update_;
  Host host_;
  int dp_rank_ = 0, dp_size_ = 1;
  std::vector<Shard> shards_;
  std::vector<GatherBucket> buckets_;
};

}  // namespace triax::plugins

TRIAX_PLUGIN_LIBRARY(triax::optimizer_plugin<triax::plugins::Zero1AdamW>(
    "zero1_adamw", "1.0.0",
    "ZeRO-1 AdamW: fp32 masters and moments sharded over data-parallel ranks, parameters all-gathered"))
