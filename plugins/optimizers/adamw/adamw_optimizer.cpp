// The `adamw` optimizer plugin: AdamW with fp32 master weights over whole parameters
// (adamw_optimizer.hpp).
#include "adamw_optimizer.hpp"

TRIAX_PLUGIN_LIBRARY(triax::optimizer_plugin<triax::plugins::AdamWOptimizer<TRIAX_GRADIENTS_WHOLE>>(
    "adamw", "1.0.0", "AdamW with fp32 master weights (LibTorch fused kernel or foreach ops)"))
