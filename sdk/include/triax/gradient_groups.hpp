// The process group a parameter's gradient is averaged over, for the host (which reduces the
// gradients) and the SDK (whose ZeRO-3 shards span the same ranks).
#pragma once

#include "triax/abi.h"

namespace triax {

// A parameter's model-declared group (dp, or edp for an expert shard) widened by the cp ranks,
// which hold the same parameters (DP_CP, EDP_CP), once the mesh has cp > 1. Unchanged at cp 1.
inline triax_group with_context_parallel(triax_group gradient_group, int cp_size) {
  if (cp_size <= 1) return gradient_group;
  if (gradient_group == TRIAX_GROUP_DP) return TRIAX_GROUP_DP_CP;
  if (gradient_group == TRIAX_GROUP_EDP) return TRIAX_GROUP_EDP_CP;
  return gradient_group;
}

}  // namespace triax
