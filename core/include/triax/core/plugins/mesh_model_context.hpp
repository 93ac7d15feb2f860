#pragma once
// The part of a model's context that the mesh decides: this rank's place in every group a model
// may use. Training and generation fill the rest (blocks, device, dtype, seed, init) themselves.
#include "triax/abi.h"
#include "triax/core/comm/communicator.hpp"

namespace triax {

inline triax_model_context mesh_model_context(const Communicator& communicator) {
  triax_model_context context{};
  context.struct_size = sizeof(context);
  context.tp_rank = communicator.rank(TRIAX_GROUP_TP);
  context.tp_size = communicator.size(TRIAX_GROUP_TP);
  context.pp_rank = communicator.rank(TRIAX_GROUP_PP);
  context.pp_size = communicator.size(TRIAX_GROUP_PP);
  context.dp_rank = communicator.rank(TRIAX_GROUP_DP);
  context.dp_size = communicator.size(TRIAX_GROUP_DP);
  context.ep_rank = communicator.rank(TRIAX_GROUP_EP);
  context.ep_size = communicator.size(TRIAX_GROUP_EP);
  context.edp_rank = communicator.rank(TRIAX_GROUP_EDP);
  context.edp_size = communicator.size(TRIAX_GROUP_EDP);
  return context;
}

}  // namespace triax
