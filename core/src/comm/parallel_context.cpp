#include "triax/core/comm/parallel_context.hpp"

#include <algorithm>
#include <sstream>

#include "triax/error.hpp"

namespace triax {

void MeshShape::validate() const {
  auto positive = [](int value, const char* key) {
    if (value < 1)
      throw ConfigError(std::string("parallelism.") + key + ": must be >= 1, got " + std::to_string(value));
  };
  positive(dp, "dp");
  positive(pp, "pp");
  positive(tp, "tp");
  positive(ep, "expert_parallel_size");
  positive(cp, "context_parallel_size");
  if (dp % ep != 0)
    throw ConfigError("parallelism.expert_parallel_size (" + std::to_string(ep) + ") must divide parallelism.dp (" +
                      std::to_string(dp) + ")");
}

ParallelContext::ParallelContext(MeshShape shape, int world_rank)
    : shape_(shape), world_rank_(world_rank), coordinates_() {
  shape_.validate();
  if (world_rank < 0 || world_rank >= shape_.world_size())
    throw Error("rank " + std::to_string(world_rank) + " is outside a mesh of " + std::to_string(shape_.world_size()) +
                " ranks");
  coordinates_ = coordinates_of(shape_, world_rank);
}

int ParallelContext::rank_of(const MeshShape& shape, const MeshCoordinates& at) {
  return at.tp + shape.tp * (at.cp + shape.cp * (at.pp + shape.pp * at.dp));
}

MeshCoordinates ParallelContext::coordinates_of(const MeshShape& shape, int world_rank) {
  MeshCoordinates at;
  at.tp = world_rank % shape.tp;
  at.cp = (world_rank / shape.tp) % shape.cp;
  at.pp = (world_rank / (shape.tp * shape.cp)) % shape.pp;
  at.dp = world_rank / (shape.tp * shape.cp * shape.pp);
  return at;
}

std::vector<int> ParallelContext::members_of(triax_group group, int world_rank) const {
  const MeshCoordinates at = coordinates_of(shape_, world_rank);
  // The world rank at `at` with some coordinates changed.
  auto rank_at = [&](int dp, int pp, int tp, int cp) { return rank_of(shape_, {dp, pp, tp, cp}); };
  const int first_expert_peer = at.dp - at.dp % shape_.ep;  // this ep group's first dp rank
  const int expert_shard = at.dp % shape_.ep;               // this rank's position in its ep group
  std::vector<int> ranks;
  switch (group) {
    case TRIAX_GROUP_WORLD:
      for (int r = 0; r < shape_.world_size(); ++r) ranks.push_back(r);
      break;
    case TRIAX_GROUP_TP:
      for (int t = 0; t < shape_.tp; ++t) ranks.push_back(rank_at(at.dp, at.pp, t, at.cp));
      break;
    case TRIAX_GROUP_PP:
      for (int p = 0; p < shape_.pp; ++p) ranks.push_back(rank_at(at.dp, p, at.tp, at.cp));
      break;
    case TRIAX_GROUP_DP:
      for (int d = 0; d < shape_.dp; ++d) ranks.push_back(rank_at(d, at.pp, at.tp, at.cp));
      break;
    case TRIAX_GROUP_MP:  // one model replica: every (pp, tp) of this (dp, cp) position
      for (int p = 0; p < shape_.pp; ++p)
        for (int t = 0; t < shape_.tp; ++t) ranks.push_back(rank_at(at.dp, p, t, at.cp));
      break;
    case TRIAX_GROUP_EP:  // ep consecutive dp ranks holding different experts of the same layers
      for (int d = first_expert_peer; d < first_expert_peer + shape_.ep; ++d)
        ranks.push_back(rank_at(d, at.pp, at.tp, at.cp));
      break;
    case TRIAX_GROUP_EDP:  // every ep-th dp rank: the replicas of the same expert shard
      for (int d = expert_shard; d < shape_.dp; d += shape_.ep) ranks.push_back(rank_at(d, at.pp, at.tp, at.cp));
      break;
    case TRIAX_GROUP_CP:
      for (int c = 0; c < shape_.cp; ++c) ranks.push_back(rank_at(at.dp, at.pp, at.tp, c));
      break;
    case TRIAX_GROUP_DP_CP:  // dp-major: group rank = dp_rank * cp + cp_rank (ReplicaGroups relies on it)
      for (int d = 0; d < shape_.dp; ++d)
        for (int c = 0; c < shape_.cp; ++c) ranks.push_back(rank_at(d, at.pp, at.tp, c));
      break;
    case TRIAX_GROUP_EDP_CP:  // edp-major: group rank = edp_rank * cp + cp_rank
      for (int d = expert_shard; d < shape_.dp; d += shape_.ep)
        for (int c = 0; c < shape_.cp; ++c) ranks.push_back(rank_at(d, at.pp, at.tp, c));
      break;
    default:
      throw Error("unknown process group " + std::to_string(static_cast<int>(group)));
  }
  return ranks;
}

std::vector<int> ParallelContext::members(triax_group group) const { return members_of(group, world_rank_); }

int ParallelContext::rank(triax_group group) const {
  const std::vector<int> ranks = members(group);
  return static_cast<int>(std::find(ranks.begin(), ranks.end(), world_rank_) - ranks.begin());
}

int ParallelContext::size(triax_group group) const { return static_cast<int>(members(group).size()); }

std::vector<std::vector<int>> ParallelContext::all_groups(triax_group group) const {
  std::vector<std::vector<int>> groups;
  for (int r = 0; r < shape_.world_size(); ++r) {
    std::vector<int> ranks = members_of(group, r);
    if (std::find(groups.begin(), groups.end(), ranks) == groups.end()) groups.push_back(std::move(ranks));
  }
  return groups;
}

int ParallelContext::group_index(triax_group group) const {
  const auto groups = all_groups(group);
  return static_cast<int>(std::find(groups.begin(), groups.end(), members(group)) - groups.begin());
}

int ParallelContext::previous_pipeline_rank() const {
  if (is_first_pipeline_stage()) return -1;
  return rank_of(shape_, {coordinates_.dp, coordinates_.pp - 1, coordinates_.tp, coordinates_.cp});
}

int ParallelContext::next_pipeline_rank() const {
  if (is_last_pipeline_stage()) return -1;
  return rank_of(shape_, {coordinates_.dp, coordinates_.pp + 1, coordinates_.tp, coordinates_.cp});
}

const char* group_name(triax_group group) {
  switch (group) {
    case TRIAX_GROUP_WORLD:
      return "world";
    case TRIAX_GROUP_TP:
      return "tp";
    case TRIAX_GROUP_PP:
      return "pp";
    case TRIAX_GROUP_DP:
      return "dp";
    case TRIAX_GROUP_MP:
      return "mp";
    case TRIAX_GROUP_EP:
      return "ep";
    case TRIAX_GROUP_EDP:
      return "edp";
    case TRIAX_GROUP_CP:
      return "cp";
    case TRIAX_GROUP_DP_CP:
      return "dp_cp";
    case TRIAX_GROUP_EDP_CP:
      return "edp_cp";
  }
  return "unknown";
}

std::string format_ranks(const std::vector<int>& ranks) {
  std::string text = "[";
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? " " : "") + std::to_string(ranks[i]);
  return text + "]";
}

std::string ParallelContext::describe(const MeshShape& shape) {
  std::ostringstream out;
  const bool experts = shape.ep > 1, context = shape.cp > 1;
  out << "mesh dp=" << shape.dp << " pp=" << shape.pp << " tp=" << shape.tp;
  if (context) out << " cp=" << shape.cp;
  if (experts) out << " ep=" << shape.ep;
  out << ": " << shape.world_size() << " ranks, rank = tp_rank";
  if (context) out << " + cp_rank*" << shape.tp;
  out << " + pp_rank*" << shape.tp * shape.cp << " + dp_rank*" << shape.tp * shape.cp * shape.pp << "\n\n";
  out << "rank  dp  pp  tp" << (context ? "  cp" : "") << (experts ? "  ep edp" : "") << "  prev  next\n";
  for (int r = 0; r < shape.world_size(); ++r) {
    ParallelContext mesh(shape, r);
    const MeshCoordinates& at = mesh.coordinates();
    auto neighbour = [](int rank) { return rank < 0 ? std::string("-") : std::to_string(rank); };
    char line[96];
    std::snprintf(line, sizeof line, "%4d %3d %3d %3d", r, at.dp, at.pp, at.tp);
    out << line;
    if (context) {
      std::snprintf(line, sizeof line, " %3d", at.cp);
      out << line;
    }
    if (experts) {
      std::snprintf(line, sizeof line, " %3d %3d", mesh.rank(TRIAX_GROUP_EP), mesh.rank(TRIAX_GROUP_EDP));
      out << line;
    }
    std::snprintf(line, sizeof line, " %5s %5s\n", neighbour(mesh.previous_pipeline_rank()).c_str(),
                  neighbour(mesh.next_pipeline_rank()).c_str());
    out << line;
  }
  const ParallelContext first(shape, 0);
  std::vector<triax_group> kinds = {TRIAX_GROUP_TP, TRIAX_GROUP_PP, TRIAX_GROUP_DP, TRIAX_GROUP_MP};
  if (context) kinds.insert(kinds.end(), {TRIAX_GROUP_CP, TRIAX_GROUP_DP_CP});
  if (experts) kinds.insert(kinds.end(), {TRIAX_GROUP_EP, TRIAX_GROUP_EDP});
  if (experts && context) kinds.push_back(TRIAX_GROUP_EDP_CP);
  for (triax_group kind : kinds) {
    out << "\n" << group_name(kind) << " groups:";
    for (const auto& ranks : first.all_groups(kind)) out << " " << format_ranks(ranks);
  }
  out << "\n";
  return out.str();
}

}  // namespace triax
