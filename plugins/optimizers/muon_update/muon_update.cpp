#include "muon_update.hpp"

#include <ATen/ATen.h>

#include <cmath>

#include "newton_schulz_batches.hpp"
#include "triax/error.hpp"
#include "triax/optimizer.hpp"
#include "triax/tensor_text.hpp"

namespace triax::plugins {
namespace {

int64_t elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Every tp rank's shard, flattened, in rank order -> the whole tensor, flattened; and back.
at::Tensor join_shards(const at::Tensor& rank_order, const MuonTarget& t, int tp_size) {
  std::vector<at::Tensor> shards;
  for (const at::Tensor& row : rank_order.view({tp_size, -1}).unbind(0)) shards.push_back(row.view(t.shard_shape));
  return at::cat(shards, t.split_dim).reshape({-1});
}

at::Tensor split_shards(const at::Tensor& whole, const MuonTarget& t, int tp_size) {
  std::vector<at::Tensor> shards;
  for (const at::Tensor& shard : whole.view(t.whole_shape).chunk(tp_size, t.split_dim)) shards.push_back(shard.reshape({-1}));
  return at::cat(shards);
}

// values[items[k]] through one exchange, to the owners or back; the other values pass as they are.
std::vector<at::Tensor> exchanged(const OwnerExchange& exchange, const std::vector<size_t>& items,
                                  std::vector<at::Tensor> values, bool to_owners) {
  std::vector<at::Tensor> in;
  for (size_t i : items) in.push_back(values[i]);
  const std::vector<at::Tensor> out = to_owners ? exchange.gather(in) : exchange.scatter(in);
  for (size_t k = 0; k < items.size(); ++k) values[items[k]] = out[k];
  return values;
}

}  // namespace

int64_t tensor_parallel_split(const OptimizerParam& param, int tp_rank, int tp_size) {
  const std::vector<int64_t> whole = whole_shape(param);
  const std::vector<int64_t> local = param.param.sizes().vec();
  auto refuse = [&](const std::string& why) {
    throw Error(TRIAX_ERROR_UNSUPPORTED, "muon: parameter " + param.name + " (shard " + shape_text(local) +
                                             " of " + shape_text(whole) + "): " + why);
  };
  if (param.flags & TRIAX_PARAM_ZERO3_SHARD) refuse("a ZeRO-3 shard; muon has no ZeRO-3 form");
  if (whole.size() != local.size()) refuse("its tensor and its whole shape differ in dimensions");
  if (holds_experts(param)) {
    if (!std::equal(whole.begin() + 1, whole.end(), local.begin() + 1))
      refuse("an expert shard that holds no whole expert matrices");
    return -1;
  }
  if (param.flags & TRIAX_PARAM_TP_REPLICATED) return -1;
  int64_t split = -1;
  for (size_t d = 0; d < whole.size(); ++d) {
    if (whole[d] == local[d]) continue;
    if (split >= 0) refuse("split over tensor-parallel ranks along more than one dimension");
    split = static_cast<int64_t>(d);
  }
  if (split < 0) return -1;
  const auto d = static_cast<size_t>(split);
  const int64_t offset = d < param.shard_offset.size() ? param.shard_offset[d] : 0;
  if (whole[d] != local[d] * tp_size || offset != local[d] * tp_rank)
    refuse("not cut into " + std::to_string(tp_size) + " equal shards in tp rank order along dimension " +
           std::to_string(split));
  return split;
}

MuonUpdate::MuonUpdate(MuonOptions options, bool dp_sharded, Host host, std::function<int(triax_group)> group_rank,
                       std::function<int(triax_group)> group_size)
    : options_(options),
      dp_sharded_(dp_sharded),
      host_(host),
      group_rank_(std::move(group_rank)),
      group_size_(std::move(group_size)) {
  tp_rank_ = host_.valid() ? host_.rank(TRIAX_GROUP_TP) : 0;
  tp_size_ = host_.valid() ? host_.size(TRIAX_GROUP_TP) : 1;
}

size_t MuonUpdate::add(MuonTarget target) {
  if (target.master.scalar_type() != at::kFloat || target.master.numel() != target.range.length)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "muon: the master of " + target.name + " must be fp32 and hold its " +
                                                  std::to_string(target.range.length) + " elements");
  momenta_.push_back(at::zeros_like(target.master));
  targets_.push_back(std::move(target));
  return targets_.size() - 1;
}

void MuonUpdate::plan() {
  if (targets_.empty()) return;
  compute_ = targets_.front().master.is_cuda() ? at::kBFloat16 : at::kFloat;
  const at::TensorOptions options = targets_.front().master.options().dtype(compute_);
  dp_owned_.assign(targets_.size(), true);
  if (dp_sharded_) {
    std::map<triax_group, std::vector<size_t>> by_group;
    for (size_t i = 0; i < targets_.size(); ++i) by_group[targets_[i].group].push_back(i);
    for (const auto& [group, slots] : by_group) {
      const int ranks = group_size_(group);
      std::vector<int64_t> sizes;
      std::vector<std::vector<int64_t>> pieces;
      for (size_t i : slots) {
        const int64_t numel = elements(targets_[i].shard_shape);
        sizes.push_back(elements(targets_[i].whole_shape));
        std::vector<int64_t> per_rank;
        for (int r = 0; r < ranks; ++r) per_rank.push_back(zero_shard(numel, r, ranks).length);
        pieces.push_back(std::move(per_rank));
      }
      OwnerExchange exchange(host_, group, group_rank_(group), balanced_owners(sizes, ranks), std::move(pieces), options);
      for (size_t k = 0; k < slots.size(); ++k) dp_owned_[slots[k]] = exchange.owns(k);
      dp_exchanges_.emplace(group, std::make_pair(std::move(exchange), slots));
    }
  }
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> pieces;
  for (size_t i = 0; i < targets_.size(); ++i)
    if (dp_owned_[i] && targets_[i].split_dim >= 0) {
      tp_items_.push_back(i);
      sizes.push_back(elements(targets_[i].whole_shape));
      pieces.emplace_back(static_cast<size_t>(tp_size_), elements(targets_[i].shard_shape));
    }
  tp_exchange_.emplace(host_, TRIAX_GROUP_TP, tp_rank_, balanced_owners(sizes, tp_size_), std::move(pieces),
                            options);
  computed_ = dp_owned_;
  for (size_t k = 0; k < tp_items_.size(); ++k) computed_[tp_items_[k]] = tp_exchange_->owns(k);
}

void MuonUpdate::step(const std::vector<at::Tensor>& grads, double learning_rate, const at::Tensor& grad_scale) {
  if (grads.size() != targets_.size())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "muon step: " + std::to_string(grads.size()) + " gradients for " +
                                                  std::to_string(targets_.size()) + " matrices");
  if (targets_.empty()) return;
  at::NoGradGuard no_grad;
  const std::vector<at::Tensor> wholes = gather_wholes(momentum_updates(grads, grad_scale));
  apply(scatter_wholes(orthogonalise_wholes(wholes)), learning_rate);
}

std::vector<at::Tensor> MuonUpdate::momentum_updates(const std::vector<at::Tensor>& grads,
                                                     const at::Tensor& grad_scale) {
  std::vector<at::Tensor> flat;
  for (size_t i = 0; i < grads.size(); ++i) {
    if (grads[i].numel() != targets_[i].range.length)
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "muon step: the gradient of " + targets_[i].name + " holds " +
                                                    std::to_string(grads[i].numel()) + " elements, its piece " +
                                                    std::to_string(targets_[i].range.length));
    flat.push_back(grads[i].reshape({-1}));
  }
  std::vector<at::Tensor> g = clipped_full_precision(flat, grad_scale);
  at::_foreach_mul_(momenta_, options_.momentum);
  at::_foreach_add_(momenta_, g);
  std::vector<at::Tensor> u = options_.nesterov ? at::_foreach_add(g, momenta_, options_.momentum) : momenta_;
  // Rounded once, here, to what the orthogonalisation computes in: every mesh sees the same values.
  for (at::Tensor& piece : u) piece = piece.to(compute_);
  return u;
}

std::vector<at::Tensor> MuonUpdate::gather_wholes(const std::vector<at::Tensor>& pieces) const {
  std::vector<at::Tensor> shards = pieces;  // then each target's flattened tp shard where dp-owned
  for (const auto& [group, entry] : dp_exchanges_) shards = exchanged(entry.first, entry.second, shards, true);
  const std::vector<at::Tensor> joined = exchanged(*tp_exchange_, tp_items_, shards, true);
  std::vector<at::Tensor> wholes(targets_.size());
  for (size_t i = 0; i < targets_.size(); ++i)
    if (computed_[i])
      wholes[i] = targets_[i].split_dim < 0 ? shards[i] : join_shards(joined[i], targets_[i], tp_size_);
  return wholes;
}

std::vector<at::Tensor> MuonUpdate::orthogonalise_wholes(const std::vector<at::Tensor>& wholes) const {
  std::vector<size_t> slots;  // the targets orthogonalised here
  std::vector<at::Tensor> matrices;
  for (size_t i = 0; i < targets_.size(); ++i)
    if (wholes[i].defined()) {
      slots.push_back(i);
      matrices.push_back(wholes[i].view({targets_[i].view.count, targets_[i].view.rows, targets_[i].view.cols}));
    }
  const std::vector<at::Tensor> done = orthogonalise_all(matrices, options_.coefficients, options_.ns_steps, compute_);
  std::vector<at::Tensor> results(targets_.size());
  for (size_t k = 0; k < slots.size(); ++k) results[slots[k]] = done[k].reshape({-1});
  return results;
}

std::vector<at::Tensor> MuonUpdate::scatter_wholes(const std::vector<at::Tensor>& results) const {
  std::vector<at::Tensor> shards(results.size());
  for (size_t i = 0; i < results.size(); ++i)
    shards[i] = results[i].defined() && targets_[i].split_dim >= 0 ? split_shards(results[i], targets_[i], tp_size_)
                                                                    : results[i];
  shards = exchanged(*tp_exchange_, tp_items_, shards, false);
  for (const auto& [group, entry] : dp_exchanges_) shards = exchanged(entry.first, entry.second, shards, false);
  return shards;
}

void MuonUpdate::apply(const std::vector<at::Tensor>& orthogonalised, double learning_rate) {
  for (size_t i = 0; i < targets_.size(); ++i) {
    const MuonTarget& t = targets_[i];
    const double lr = learning_rate * t.lr_scale;
    const double scale = options_.update_rms * std::sqrt(static_cast<double>(std::max(t.view.rows, t.view.cols)));
    if (t.weight_decay != 0.0) t.master.mul_(1.0 - lr * t.weight_decay);
    // The result is read in its own dtype and widened inside the add, exactly as a fp32 copy of it
    // would be, without writing that copy.
    t.master.add_(orthogonalised[i], -lr * scale);
    if (t.rounded.defined()) t.rounded.copy_(t.master);
  }
}

int64_t MuonUpdate::momentum_bytes() const {
  int64_t bytes = 0;
  for (const at::Tensor& m : momenta_) bytes += static_cast<int64_t>(m.nbytes());
  return bytes;
}

void MuonUpdate::round_masters() const {
  at::NoGradGuard no_grad;
  for (const MuonTarget& t : targets_)
    if (t.rounded.defined()) t.rounded.copy_(t.master);
}

}  // namespace triax::plugins
