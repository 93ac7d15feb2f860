// The process mesh: world = dp x pp x cp x tp (with expert parallelism inside dp), and every
// process group a rank belongs to. Rank arithmetic puts tp fastest so that a tensor-parallel
// group sits inside one node, and context parallelism next to it: its K/V traffic comes every
// layer, forward and backward, more often than anything but tp's (docs/context_parallelism.md):
//
//     rank = tp_rank + cp_rank * TP + pp_rank * TP * CP + dp_rank * TP * CP * PP
//
// Pure arithmetic, no communication: the communicators build their groups from it, and
// `triax inspect mesh` prints it.
#pragma once

#include <string>
#include <vector>

#include "triax/abi.h"
#include "triax/gradient_groups.hpp"  // with_context_parallel

namespace triax {

struct MeshShape {
  int dp = 1;
  int pp = 1;
  int tp = 1;
  int ep = 1;  // expert-parallel size; divides dp
  int cp = 1;  // context-parallel size: the ranks holding slices of the same sequences

  int world_size() const { return dp * pp * tp * cp; }
  // Throws ConfigError when a size is < 1 or ep does not divide dp.
  void validate() const;
};

struct MeshCoordinates {
  int dp = 0;
  int pp = 0;
  int tp = 0;
  int cp = 0;
};

class ParallelContext {
 public:
  // `world_rank` in [0, shape.world_size()).
  ParallelContext(MeshShape shape, int world_rank);

  static int rank_of(const MeshShape& shape, const MeshCoordinates& at);
  static MeshCoordinates coordinates_of(const MeshShape& shape, int world_rank);

  const MeshShape& shape() const { return shape_; }
  int world_rank() const { return world_rank_; }
  const MeshCoordinates& coordinates() const { return coordinates_; }

  // This rank's position in, and the size of, its group of the given kind.
  int rank(triax_group group) const;
  int size(triax_group group) const;
  // World ranks of this rank's group of the given kind, ordered by rank within the group.
  std::vector<int> members(triax_group group) const;
  // Every group of a kind (each as world ranks in group order); the groups partition the world.
  std::vector<std::vector<int>> all_groups(triax_group group) const;
  // Index of this rank's group among all_groups(group): the "color" of an MPI_Comm_split.
  int group_index(triax_group group) const;

  // World ranks of the neighbouring pipeline stages of this rank's replica (-1 at the ends).
  int previous_pipeline_rank() const;
  int next_pipeline_rank() const;
  bool is_first_pipeline_stage() const { return coordinates_.pp == 0; }
  bool is_last_pipeline_stage() const { return coordinates_.pp == shape_.pp - 1; }

  // The rank table and every group, for `triax inspect mesh` and the start-up log.
  static std::string describe(const MeshShape& shape);

 private:
  std::vector<int> members_of(triax_group group, int world_rank) const;

  MeshShape shape_;
  int world_rank_;
  MeshCoordinates coordinates_;
};

// "tp", "pp", "dp", ... for messages.
const char* group_name(triax_group group);

// "[0 2 4]": a list of ranks as the mesh's printouts and the communicators' messages show it.
std::string format_ranks(const std::vector<int>& ranks);

}  // namespace triax
