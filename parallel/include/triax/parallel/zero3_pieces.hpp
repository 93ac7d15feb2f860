// Where a ZeRO-3 parameter shard (TRIAX_PARAM_ZERO3_SHARD) lies: a range of the elements of its
// tensor-parallel shard, the box that checkpoints store and reshard (global_shape/shard_offset
// say where that box sits). The ABI carries the box's offset but not its shape: the shape is
// recovered from the offsets of the peers, which tile the parameter in equal boxes (tp ranks along
// their split dimension, ep ranks along the experts): the box's extent along a dimension is the
// smallest gap between distinct offsets there, or the whole dimension where all agree.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "triax/parallel/replica_ownership.hpp"
#include "triax/parameter.hpp"
#include "triax/zero_partition.hpp"

namespace triax {

class Communicator;

struct Zero3Piece {
  std::vector<int64_t> box_shape;  // the tensor-parallel shard's shape
  ZeroShard range;                 // this rank's elements of it, flattened
};

// By parameter name, for every ZeRO-3 shard among a rank's parameters (empty when there is none).
struct Zero3Layout {
  std::map<std::string, Zero3Piece> pieces;

  const Zero3Piece* find(const std::string& name) const {
    auto found = pieces.find(name);
    return found == pieces.end() ? nullptr : &found->second;
  }
};

// Collective over the tp and ep groups.
Zero3Layout zero3_layout(const std::vector<NamedParameter>& parameters, Communicator& communicator,
                         const ReplicaGroups& groups, const c10::Device& device);

// A stand-in for a ZeRO-3 parameter as the checkpoint store reads it: the whole box, of `dtype`,
// with the parameter's name and box description (its values are whatever the store puts there).
NamedParameter whole_box(const NamedParameter& parameter, const Zero3Piece& piece, at::ScalarType dtype);

}  // namespace triax
