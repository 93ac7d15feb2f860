#include "triax/layers/zero3_parameters.hpp"

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <utility>

#include "triax/error.hpp"
#include "triax/gradient_groups.hpp"
#include "triax/layers/context_parallel.hpp"
#include "triax/model.hpp"

namespace triax {
namespace {

// Outside gather(): an empty tensor of the parameter's dtype and device, so that nothing of the
// whole parameter stays allocated.
at::Tensor empty_like_nothing(const at::Tensor& whole) { return at::empty({0}, whole.options().requires_grad(false)); }

}  // namespace

Zero3Unit::Zero3Unit(std::vector<Member> members, Host host, int dp_size)
    : members_(std::move(members)), host_(host), dp_size_(dp_size) {
  std::map<std::pair<int, int>, size_t> bucket_of;  // (group, dtype) -> bucket
  for (size_t k = 0; k < members_.size(); ++k) {
    const Member& m = members_[k];
    const auto key = std::make_pair(static_cast<int>(m.group), static_cast<int>(m.shard.scalar_type()));
    auto found = bucket_of.find(key);
    if (found == bucket_of.end()) {
      found = bucket_of.emplace(key, buckets_.size()).first;
      buckets_.emplace_back();
      buckets_.back().group = m.group;
      buckets_.back().ranks = m.ranks;
    }
    Bucket& bucket = buckets_[found->second];
    bucket.members.push_back(k);
    bucket.offsets.push_back(bucket.segment);
    bucket.segment += m.range.chunk;
  }
}

Zero3Unit::~Zero3Unit() {
  for (Bucket& bucket : buckets_)
    if (bucket.pending) bucket.pending->wait();  // MPI must not write into a freed buffer
}

void Zero3Unit::start_gather() {
  if (gathered_) return;
  at::NoGradGuard no_grad;
  for (Bucket& bucket : buckets_) {
    if (bucket.gathered.defined() || bucket.ranks == 1) continue;  // started already, or nothing to gather
    const at::Tensor& first = members_[bucket.members.front()].shard;
    bucket.send = at::zeros({bucket.segment}, first.options().requires_grad(false));
    for (size_t i = 0; i < bucket.members.size(); ++i) {
      const Member& m = members_[bucket.members[i]];
      bucket.send.narrow(0, bucket.offsets[i], m.range.length).copy_(m.shard.detach());
    }
    bucket.gathered = at::empty({bucket.ranks * bucket.segment}, bucket.send.options());
    bucket.pending =
        std::make_unique<PendingCollective>(host_.start_all_gather(bucket.group, bucket.gathered, bucket.send));
  }
}

void Zero3Unit::gather() {
  if (gathered_) return;
  start_gather();
  at::NoGradGuard no_grad;
  for (Bucket& bucket : buckets_) {
    if (bucket.ranks == 1) {  // the shard is the whole parameter: shared, not copied
      for (size_t k : bucket.members) members_[k].whole.set_data(members_[k].shard.detach().view(members_[k].shape));
      continue;
    }
    bucket.pending->wait();
    bucket.pending.reset();
    bucket.send = at::Tensor();
    const at::Tensor by_rank = bucket.gathered.view({bucket.ranks, bucket.segment});
    for (size_t i = 0; i < bucket.members.size(); ++i) {
      Member& m = members_[bucket.members[i]];
      at::Tensor flat = by_rank.narrow(1, bucket.offsets[i], m.range.chunk).reshape({-1});
      m.whole.set_data(flat.narrow(0, 0, m.numel).view(m.shape));
    }
    bucket.gathered = at::Tensor();  // the members' views keep what they need
  }
  gathered_ = true;
}

void Zero3Unit::release() {
  for (Member& m : members_) m.whole.set_data(empty_like_nothing(m.whole));
  gathered_ = false;
}

std::vector<at::Tensor> Zero3Unit::reduce_scatter(const std::vector<at::Tensor>& whole_gradients) const {
  if (whole_gradients.size() != members_.size())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "zero3: " + std::to_string(whole_gradients.size()) + " gradients for " +
                                                  std::to_string(members_.size()) + " parameters");
  at::NoGradGuard no_grad;
  const double mean = 1.0 / static_cast<double>(dp_size_);
  std::vector<at::Tensor> shard_gradients(members_.size());
  for (const Bucket& bucket : buckets_) {
    const at::Tensor& first = members_[bucket.members.front()].shard;
    // Rank-major: row r holds every member's chunk r, so the reduce-scatter leaves this rank's row.
    at::Tensor input = at::zeros({bucket.ranks, bucket.segment}, first.options().requires_grad(false));
    for (size_t i = 0; i < bucket.members.size(); ++i) {
      const Member& m = members_[bucket.members[i]];
      const at::Tensor& g = whole_gradients[bucket.members[i]];
      if (!g.defined()) continue;
      const at::Tensor flat = g.reshape({-1});
      const int64_t numel = flat.numel(), chunk = m.range.chunk;
      if (chunk == 0) continue;
      const int64_t full_rows = numel / chunk, rest = numel - full_rows * chunk;
      at::Tensor columns = input.narrow(1, bucket.offsets[i], chunk);
      if (full_rows > 0)
        columns.narrow(0, 0, full_rows).copy_(flat.narrow(0, 0, full_rows * chunk).view({full_rows, chunk}));
      if (rest > 0) columns[full_rows].narrow(0, 0, rest).copy_(flat.narrow(0, full_rows * chunk, rest));
    }
    at::Tensor own = input[0];
    if (bucket.ranks > 1) {
      own = at::empty({bucket.segment}, input.options());
      host_.reduce_scatter(bucket.group, own, input.view({-1}));
    }
    own.mul_(mean);
    for (size_t i = 0; i < bucket.members.size(); ++i) {
      const Member& m = members_[bucket.members[i]];
      shard_gradients[bucket.members[i]] = own.narrow(0, bucket.offsets[i], m.range.length);
    }
  }
  return shard_gradients;
}

std::vector<at::Tensor> Zero3Unit::wholes() const {
  std::vector<at::Tensor> out;
  for (const Member& m : members_) out.push_back(m.whole);
  return out;
}

std::vector<at::Tensor> Zero3Unit::shards() const {
  std::vector<at::Tensor> out;
  for (const Member& m : members_) out.push_back(m.shard);
  return out;
}

Zero3Parameters::Zero3Parameters(std::vector<NamedParameter>& table, const ModelContext& context)
    : host_(context.host), dp_size_(context.dp_size) {
  at::NoGradGuard no_grad;
  const ContextParallel cp = ContextParallel::of(context.host);
  dp_size_ *= cp.size;  // the gradients' mean spans dp x cp
  for (NamedParameter& p : table) {
    // The cp ranks hold the same parameters and each computes its slice of the gradient: the
    // shards span dp x cp (edp x cp for experts), the groups the host averages gradients over.
    const bool expert = p.spec.gradient_group == TRIAX_GROUP_EDP;
    const triax_group group = with_context_parallel(p.spec.gradient_group, cp.size);
    const int rank = cp.active() ? host_.rank(group) : expert ? context.edp_rank : context.dp_rank;
    const int size = cp.active() ? host_.size(group) : expert ? context.edp_size : context.dp_size;
    if (!p.tensor.is_contiguous())
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                  "zero3: parameter '" + p.name + "' is not contiguous; its shard is a range of its elements");
    Zero3Unit::Member m;
    m.whole = p.tensor;
    m.group = group;
    m.ranks = size;
    m.shape = p.tensor.sizes().vec();
    m.numel = p.tensor.numel();
    m.range = zero_shard(p.tensor.numel(), rank, size);
    m.shard = p.tensor.detach().reshape({-1}).narrow(0, m.range.offset, m.range.length).clone();
    m.shard.set_requires_grad(true);
    m.whole.set_data(empty_like_nothing(m.whole));
    p.tensor = m.shard;
    p.spec.flags |= TRIAX_PARAM_ZERO3_SHARD;
    members_.push_back(std::move(m));
  }
}

std::shared_ptr<Zero3Unit> Zero3Parameters::unit(const std::vector<at::Tensor>& module_parameters) const {
  std::vector<Zero3Unit::Member> chosen;
  for (const at::Tensor& parameter : module_parameters) {
    const Zero3Unit::Member* found = nullptr;
    for (const Zero3Unit::Member& m : members_)
      if (m.whole.unsafeGetTensorImpl() == parameter.unsafeGetTensorImpl()) found = &m;
    if (found == nullptr)
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "zero3: a module parameter is not among the model's parameters");
    bool listed = false;
    for (const Zero3Unit::Member& m : chosen) listed = listed || m.shard.is_same(found->shard);
    if (!listed) chosen.push_back(*found);
  }
  return std::make_shared<Zero3Unit>(std::move(chosen), host_, dp_size_);
}

}  // namespace triax
