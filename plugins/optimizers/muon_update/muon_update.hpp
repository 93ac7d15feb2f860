// The Muon update of the parameters that take it, on any mesh:
//
//   m ← μ·m + g;   u = g + μ·m (Nesterov) or m;   O = NewtonSchulz(whole matrix of u);
//   p ← p·(1 − lr·wd) − lr · update_rms · sqrt(max(rows, cols)) · O
//
// where the orthogonalisation needs each whole matrix, but a rank may hold only a piece of its u:
// its ZeRO-1 range (over the parameter's gradient group) of its tensor-parallel shard. Each matrix
// therefore has one owner, balanced by size: the pieces of u go to the owning rank of the gradient
// group (an all_to_all_v), which then holds the whole tp shard; if the parameter is split over tp,
// the tp shards go on to one owning rank of the tp group (another), which puts them together
// along the split dimension, column- or row-parallel alike. The owner orthogonalises the whole
// matrix, exactly what the single rank computes from the same values, and the result goes back
// the same two ways. Momentum, masters and the update stay elementwise on each rank's own piece.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "muon_selection.hpp"
#include "newton_schulz.hpp"
#include "owner_exchange.hpp"
#include "triax/host.hpp"
#include "triax/zero_partition.hpp"

namespace triax::plugins {

// One parameter that takes Muon, as this rank holds it.
struct MuonTarget {
  std::string name;
  // What the owner puts together: the whole parameter, or this ep rank's experts (held whole).
  std::vector<int64_t> whole_shape;
  std::vector<int64_t> shard_shape;    // this rank's tensor-parallel shard of it
  int64_t split_dim = -1;              // the dimension split over tp; -1: whole on every tp rank
  MatrixView view;                     // of whole_shape
  triax_group group = TRIAX_GROUP_DP;  // the ZeRO-1 range is over it
  ZeroShard range;                     // this rank's elements of the flattened tp shard
  at::Tensor master;                   // fp32, those elements
  at::Tensor rounded;                  // the parameter's elements the master is rounded into, or undefined
  double weight_decay = 0.0;
  double lr_scale = 1.0;
};

// The split dimension over tp of a parameter's tensor (-1: whole on every tp rank), checked: one
// dimension at most, cut into equal shards in tp rank order; expert shards held whole per expert.
int64_t tensor_parallel_split(const OptimizerParam& param, int tp_rank, int tp_size);

class MuonUpdate {
 public:
  // `dp_sharded` (ZeRO-1): targets hold ranges of their tp shards over their gradient group, for
  // which `group_rank` / `group_size` answer.
  MuonUpdate(MuonOptions options, bool dp_sharded, Host host, std::function<int(triax_group)> group_rank,
             std::function<int(triax_group)> group_size);

  // Registers a target; its gradient is step()'s grads[slot], slot the returned index.
  size_t add(MuonTarget target);
  // Decides the owners and plans the exchanges: once, after the last add(), on every rank alike.
  void plan();

  // grads[slot]: the target's range (fp32 or the parameter's dtype), to be multiplied by
  // grad_scale (0-dim fp32; undefined = 1) first.
  void step(const std::vector<at::Tensor>& grads, double learning_rate, const at::Tensor& grad_scale);

  const MuonTarget& target(size_t slot) const { return targets_[slot]; }
  const at::Tensor& momentum(size_t slot) const { return momenta_[slot]; }
  size_t size() const { return targets_.size(); }
  int64_t momentum_bytes() const;
  // Rounds each master into its parameter (after a checkpoint was loaded into the masters).
  void round_masters() const;

 private:
  std::vector<at::Tensor> momentum_updates(const std::vector<at::Tensor>& grads, const at::Tensor& grad_scale);
  // Per target, its whole matrix where this rank orthogonalises it (undefined elsewhere).
  std::vector<at::Tensor> gather_wholes(const std::vector<at::Tensor>& pieces) const;
  std::vector<at::Tensor> orthogonalise_wholes(const std::vector<at::Tensor>& wholes) const;
  // The reverse of gather_wholes: every rank's piece of the results.
  std::vector<at::Tensor> scatter_wholes(const std::vector<at::Tensor>& results) const;
  void apply(const std::vector<at::Tensor>& orthogonalised, double learning_rate);

  MuonOptions options_;
  bool dp_sharded_ = false;
  Host host_;
  std::function<int(triax_group)> group_rank_, group_size_;
  int tp_rank_ = 0, tp_size_ = 1;
  at::ScalarType compute_ = at::kFloat;  // of the orthogonalisation and the exchanges
  std::vector<MuonTarget> targets_;
  std::vector<at::Tensor> momenta_;
  // ZeRO-1: per gradient group, its exchange and its targets (in slot order).
  std::map<triax_group, std::pair<OwnerExchange, std::vector<size_t>>> dp_exchanges_;
  std::vector<bool> dp_owned_;  // per target: its tp shard is put together here
  // The split targets whose tp shard is put together here, and their exchange over tp.
  std::vector<size_t> tp_items_;
  std::optional<OwnerExchange> tp_exchange_;
  std::vector<bool> computed_;  // per target: orthogonalised here
};

}  // namespace triax::plugins
