// The `zero3_adamw` optimizer plugin (optimizer.zero_stage 3): the model keeps its parameters as
// ZeRO-3 shards over dp (edp for experts), so the AdamW of adamw_optimizer.hpp over those shards
// keeps fp32 masters and both moments for this rank's shard only; the gradients arrive
// reduce-scattered into the shards, and nothing is gathered after the step (the model gathers its
// parameters around their use).
#include "adamw_optimizer.hpp"

TRIAX_PLUGIN_LIBRARY(triax::optimizer_plugin<triax::plugins::AdamWOptimizer<TRIAX_GRADIENTS_PARAMETERS_SHARDED>>(
    "zero3_adamw", "1.0.0",
    "ZeRO-3 AdamW: parameters, fp32 masters and moments sharded over data-parallel ranks"))
