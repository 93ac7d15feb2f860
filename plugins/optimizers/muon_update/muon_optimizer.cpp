#include "muon_optimizer.hpp"

#include <ATen/ATen.h>

#include "muon_selection.hpp"
#include "triax/error.hpp"

namespace triax::plugins {
namespace {

MuonTarget muon_target(const OptimizerParam& param, const ParameterShard& piece, const Host& host) {
  const int tp_rank = host.valid() ? host.rank(TRIAX_GROUP_TP) : 0;
  const int tp_size = host.valid() ? host.size(TRIAX_GROUP_TP) : 1;
  MuonTarget t;
  t.name = param.name;
  t.split_dim = tensor_parallel_split(param, tp_rank, tp_size);
  t.shard_shape = param.param.sizes().vec();
  t.whole_shape = t.shard_shape;
  if (t.split_dim >= 0) t.whole_shape[static_cast<size_t>(t.split_dim)] *= tp_size;
  OptimizerParam whole = param;  // the matrix view of what the owner puts together
  whole.global_shape = t.whole_shape;
  t.view = *matrix_view(whole);
  t.group = piece.group;
  t.range = piece.range;
  t.master = piece.master;
  if (piece.own_master) t.rounded = piece.live;
  t.weight_decay = piece.weight_decay;
  t.lr_scale = piece.lr_scale;
  return t;
}

}  // namespace

MuonOptimizer::MuonOptimizer(const OptimizerContext& context, const std::vector<OptimizerParam>& params,
                             bool dp_sharded, const std::string& plugin)
    : settings_(MuonSettings::read(context.optimizer)), plugin_(plugin), adamw_(settings_.adamw) {
  const std::vector<OptimizerChoice> choices = choose_optimizers(params, settings_);
  if (dp_sharded) {
    zero1_.emplace(context, params, plugin_);
    pieces_ = zero1_->shards();
  } else {
    for (const OptimizerParam& p : params) pieces_.push_back(whole_parameter_shard(p, plugin_));
  }
  auto group_rank = [this](triax_group group) { return zero1_ ? zero1_->group_rank(group) : 0; };
  auto group_size = [this](triax_group group) { return zero1_ ? zero1_->group_size(group) : 1; };
  muon_ = std::make_unique<MuonUpdate>(settings_.update, dp_sharded, context.host, group_rank, group_size);
  for (size_t i = 0; i < params.size(); ++i) {
    const ParameterShard& piece = pieces_[i];
    Entry entry;
    entry.muon = choices[i].muon;
    if (entry.muon)
      entry.slot = static_cast<int64_t>(muon_->add(muon_target(params[i], piece, context.host)));
    else if (piece.range.length > 0)
      entry.slot = static_cast<int64_t>(
          adamw_.add(piece.master, piece.weight_decay, piece.lr_scale, piece.own_master ? piece.live : at::Tensor()));
    entries_.push_back(entry);
  }
  muon_->plan();
  if (context.host.valid() && !params.empty())
    for (const std::string& line : describe_choices(params, choices)) context.host.log(TRIAX_LOG_INFO, plugin_ + ": " + line);
}

void MuonOptimizer::step(const std::vector<at::Tensor>& grads, double lr) { step_scaled(grads, lr, at::Tensor()); }

void MuonOptimizer::step_scaled(const std::vector<at::Tensor>& grads, double lr, const at::Tensor& grad_scale) {
  if (zero1_) zero1_->check_gradients(grads);
  if (grads.size() != entries_.size())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, plugin_ + " step: " + std::to_string(grads.size()) +
                                                  " gradients for " + std::to_string(entries_.size()) + " parameters");
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> adamw_grads, muon_grads;
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].muon)
      muon_grads.push_back(grads[i]);
    else if (entries_[i].slot >= 0)
      adamw_grads.push_back(grads[i].reshape({-1}));
  }
  adamw_.step(adamw_grads, lr, grad_scale);  // rounds its masters into the parameters
  muon_->step(muon_grads, lr, grad_scale);
  if (zero1_) zero1_->all_gather_parameters();
}

std::vector<OptimizerState> MuonOptimizer::state() {
  std::vector<OptimizerState> out;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const ParameterShard& piece = pieces_[i];
    const Entry& entry = entries_[i];
    if (entry.slot < 0 || piece.range.length == 0) continue;
    const auto index = static_cast<int64_t>(i);
    if (piece.own_master) out.push_back({index, "master", piece.master, piece.range.offset, false});
    if (entry.muon) {
      out.push_back({index, "momentum", muon_->momentum(static_cast<size_t>(entry.slot)), piece.range.offset, false});
      continue;
    }
    AdamWUpdate::SlotState slot = adamw_.slot_state(static_cast<size_t>(entry.slot));
    out.push_back({index, "exp_avg", slot.exp_avg, piece.range.offset, false});
    out.push_back({index, "exp_avg_sq", slot.exp_avg_sq, piece.range.offset, false});
    out.push_back({index, "step", slot.step, 0, true});
  }
  return out;
}

void MuonOptimizer::scale_parameters(const std::vector<std::pair<int64_t, at::Tensor>>& factors) {
  at::NoGradGuard no_grad;
  for (const auto& [index, factor] : factors) {
    if (index < 0 || index >= static_cast<int64_t>(pieces_.size()))
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, plugin_ + ": a factor for parameter " + std::to_string(index) +
                                                    " of " + std::to_string(pieces_.size()));
    const ParameterShard& piece = pieces_[static_cast<size_t>(index)];
    const at::Tensor whole = factor.to(at::kFloat).expand(piece.param.sizes());
    // An fp32 parameter is its own master: scaling it scales the master.
    if (piece.own_master) piece.master.mul_(whole.reshape({-1}).narrow(0, piece.range.offset, piece.range.length));
    piece.param.detach().mul_(whole);
  }
}

void MuonOptimizer::state_loaded() {
  adamw_.state_loaded();
  muon_->round_masters();
}

int64_t MuonOptimizer::state_bytes() const {
  int64_t bytes = adamw_.moment_bytes() + muon_->momentum_bytes();
  for (const ParameterShard& piece : pieces_)
    if (piece.own_master) bytes += static_cast<int64_t>(piece.master.nbytes());
  return bytes;
}

}  // namespace triax::plugins
