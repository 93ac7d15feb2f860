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
  return at.tp + at.pp * shape.tp + at.dp * shape.tp * shape.pp;
}

MeshCoordinates ParallelContext::coordinates_of(const MeshShape& shape, int world_rank) {
  MeshCoordinates at;
  at.tp = world_rank % shape.tp;
  at.pp = (world_rank / shape.tp) % shape.pp;
  at.dp = world_rank / (shape.tp * shape.pp);
  return at;
}

std::vector<int> ParallelContext::members_of(triax_group group, int world_rank) const {
  const MeshCoordinates at = coordinates_of(shape_, world_rank);
  std::vector<int> ranks;
  switch (group) {
    case TRIAX_GROUP_WORLD:
      for (int r = 0; r < shape_.world_size(); ++r) ranks.push_back(r);
      break;
    case TRIAX_GROUP_TP:
      for (int t = 0; t < shape_.tp; ++t) ranks.push_back(rank_of(shape_, {at.dp, at.pp, t}));
      break;
    case TRIAX_GROUP_PP:
      for (int p = 0; p < shape_.pp; ++p) ranks.push_back(rank_of(shape_, {at.dp, p, at.tp}));
      break;
    case TRIAX_GROUP_DP:
      for (int d = 0; d < shape_.dp; ++d) ranks.push_back(rank_of(shape_, {d, at.pp, at.tp}));
      break;
    case TRIAX_GROUP_MP:  // one model replica: every (pp, tp) of this dp rank
      for (int p = 0; p < shape_.pp; ++p)
        for (int t = 0; t < shape_.tp; ++t) ranks.push_back(rank_of(shape_, {at.dp, p, t}));
      break;
    case TRIAX_GROUP_EP: {  // ep consecutive dp ranks holding different experts of the same layers
      const int first = at.dp - at.dp % shape_.ep;
      for (int d = first; d < first + shape_.ep; ++d) ranks.push_back(rank_of(shape_, {d, at.pp, at.tp}));
      break;
    }
    case TRIAX_GROUP_EDP:  // every ep-th dp rank: the replicas of the same expert shard
      for (int d = at.dp % shape_.ep; d < shape_.dp; d += shape_.ep) ranks.push_back(rank_of(shape_, {d, at.pp, at.tp}));
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
  return rank_of(shape_, {coordinates_.dp, coordinates_.pp - 1, coordinates_.tp});
}

int ParallelContext::next_pipeline_rank() const {
  if (is_last_pipeline_stage()) return -1;
  return rank_of(shape_, {coordinates_.dp, coordinates_.pp + 1, coordinates_.tp});
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
  out << "mesh dp=" << shape.dp << " pp=" << shape.pp << " tp=" << shape.tp;
  if (shape.ep > 1) out << " ep=" << shape.ep;
  out << ": " << shape.world_size() << " ranks, rank = tp_rank + pp_rank*" << shape.tp << " + dp_rank*"
      << shape.tp * shape.pp << "\n\n";
  const bool experts = shape.ep > 1;
  out << (experts ? "rank  dp  pp  tp  ep edp  prev  next\n" : "rank  dp  pp  tp  prev  next\n");
  for (int r = 0; r < shape.world_size(); ++r) {
    ParallelContext context(shape, r);
    const MeshCoordinates& at = context.coordinates();
    auto neighbour = [](int rank) { return rank < 0 ? std::string("-") : std::to_string(rank); };
    char line[96];
    std::snprintf(line, sizeof line, "%4d %3d %3d %3d", r, at.dp, at.pp, at.tp);
    out << line;
    if (experts) {
      std::snprintf(line, sizeof line, " %3d %3d", context.rank(TRIAX_GROUP_EP), context.rank(TRIAX_GROUP_EDP));
      out << line;
    }
    std::snprintf(line, sizeof line, " %5s %5s\n", neighbour(context.previous_pipeline_rank()).c_str(),
                  neighbour(context.next_pipeline_rank()).c_str());
    out << line;
  }
  const ParallelContext first(shape, 0);
  std::vector<triax_group> kinds = {TRIAX_GROUP_TP, TRIAX_GROUP_PP, TRIAX_GROUP_DP, TRIAX_GROUP_MP};
  if (experts) kinds.insert(kinds.end(), {TRIAX_GROUP_EP, TRIAX_GROUP_EDP});
  for (triax_group kind : kinds) {
    out << "\n" << group_name(kind) << " groups:";
    for (const auto& ranks : first.all_groups(kind)) out << " " << format_ranks(ranks);
  }
  out << "\n";
  return out.str();
}

}  // namespace triax
