#include "triax/parallel/replica_ownership.hpp"

#include "triax/core/comm/communicator.hpp"
#include "triax/core/comm/parallel_context.hpp"
#include "triax/error.hpp"

namespace triax {
namespace {

// The replicas of this rank's (pp, tp) position as a mesh of their own, dp x cp with ep inside
// dp, so that the ranks and sizes of the replica groups come from ParallelContext's arithmetic.
ParallelContext replica_mesh(const ReplicaGroups& groups, triax_group group) {
  if (group != TRIAX_GROUP_DP && group != TRIAX_GROUP_EP && group != TRIAX_GROUP_EDP && group != TRIAX_GROUP_DP_CP &&
      group != TRIAX_GROUP_EDP_CP)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "replica groups: " + std::to_string(static_cast<int>(group)) +
                                                  " is not dp, ep, edp, dp_cp or edp_cp");
  MeshShape shape;
  shape.dp = groups.dp_size;
  shape.ep = groups.ep_size;
  shape.cp = groups.cp_size;
  MeshCoordinates at;
  at.dp = groups.dp_rank;
  at.cp = groups.cp_rank;
  return ParallelContext(shape, ParallelContext::rank_of(shape, at));
}

}  // namespace

ReplicaGroups ReplicaGroups::of(const Communicator& communicator) {
  ReplicaGroups groups;
  groups.dp_rank = communicator.rank(TRIAX_GROUP_DP);
  groups.dp_size = communicator.size(TRIAX_GROUP_DP);
  groups.ep_size = communicator.size(TRIAX_GROUP_EP);
  groups.tp_rank = communicator.rank(TRIAX_GROUP_TP);
  groups.cp_rank = communicator.rank(TRIAX_GROUP_CP);
  groups.cp_size = communicator.size(TRIAX_GROUP_CP);
  return groups;
}

int ReplicaGroups::rank(triax_group group) const { return replica_mesh(*this, group).rank(group); }

int ReplicaGroups::size(triax_group group) const { return replica_mesh(*this, group).size(group); }

ReplicaOwnership::ReplicaOwnership(ReplicaGroups groups, std::function<bool(const std::string&)> lowest_tied_holder)
    : groups_(groups), lowest_tied_holder_(std::move(lowest_tied_holder)) {
  if (groups_.ep_size < 1 || groups_.dp_size % groups_.ep_size != 0 || groups_.dp_rank < 0 ||
      groups_.dp_rank >= groups_.dp_size)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "replica groups: dp rank " + std::to_string(groups_.dp_rank) + " of " +
                                                  std::to_string(groups_.dp_size) + " with ep " +
                                                  std::to_string(groups_.ep_size));
}

bool ReplicaOwnership::owns_piece(const ParameterSpec& spec) const {
  if ((spec.flags & TRIAX_PARAM_TP_REPLICATED) && groups_.tp_rank != 0) return false;
  if ((spec.flags & TRIAX_PARAM_TIED) && !lowest_tied_holder_(spec.tied_key)) return false;
  return true;
}

bool ReplicaOwnership::owns_copy(const ParameterSpec& spec) const {
  return groups_.rank(spec.gradient_group) == 0 && owns_piece(spec);
}

std::vector<bool> ReplicaOwnership::counted_in_norm(const std::vector<NamedParameter>& parameters,
                                                    bool sharded) const {
  std::vector<bool> counted;
  counted.reserve(parameters.size());
  for (const NamedParameter& p : parameters) counted.push_back(sharded ? owns_piece(p.spec) : owns_copy(p.spec));
  return counted;
}

}  // namespace triax
