// Which rank counts and saves each copy of a parameter: the one answer the gradient norm and
// the checkpoint store share, so that every element of the model is counted once and saved once.
//
// A parameter's copies: the ranks of its gradient group hold identical ones (dp for dense
// parameters, edp for expert shards, whose ep ranks hold different experts); a tp-replicated
// parameter is identical on every tp rank; a tied parameter is one logical tensor held by several
// pipeline stages. The owner of a copy is rank 0 of its gradient group, tp rank 0 when it is
// tp-replicated, and the lowest pipeline stage holding it when it is tied.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "triax/abi.h"
#include "triax/parameter.hpp"

namespace triax {

class Communicator;

// This rank's place in the groups that decide ownership. Within dp, ep is fastest:
// dp_rank = edp_rank * ep_size + ep_rank. With context parallelism the cp ranks hold the same
// parameters too: dp_cp_rank = dp_rank * cp_size + cp_rank (edp_cp likewise).
struct ReplicaGroups {
  int dp_rank = 0, dp_size = 1;
  int ep_size = 1;  // divides dp_size
  int tp_rank = 0;
  int cp_rank = 0, cp_size = 1;

  static ReplicaGroups of(const Communicator& communicator);
  // This rank's position in, and the size of, TRIAX_GROUP_DP, EP, EDP, DP_CP or EDP_CP:
  // ParallelContext's answers on the mesh of the replicas (dp x cp, ep inside dp).
  int rank(triax_group group) const;
  int size(triax_group group) const;
  // The ranks whose gradients are averaged: dp x cp.
  int replicas() const { return dp_size * cp_size; }
};

class ReplicaOwnership {
 public:
  // `lowest_tied_holder(key)`: whether this pipeline rank is the lowest one holding the
  // parameter tied under `key` (TiedGradients::counts_in_norm).
  ReplicaOwnership(ReplicaGroups groups, std::function<bool(const std::string& tied_key)> lowest_tied_holder);

  // Whether this rank's copy of the parameter (the shard it holds whole) is the one that counts
  // in the gradient norm and that checkpoints store.
  bool owns_copy(const ParameterSpec& spec) const;
  // The same for this rank's ZeRO piece of it: every rank of the gradient group holds another
  // piece, so only the tp and tied copies are left to others.
  bool owns_piece(const ParameterSpec& spec) const;
  // Of each parameter: owns_piece when its gradients are ZeRO-sharded, else owns_copy.
  std::vector<bool> counted_in_norm(const std::vector<NamedParameter>& parameters, bool sharded) const;

  const ReplicaGroups& groups() const { return groups_; }

 private:
  ReplicaGroups groups_;
  std::function<bool(const std::string&)> lowest_tied_holder_;
};

}  // namespace triax
