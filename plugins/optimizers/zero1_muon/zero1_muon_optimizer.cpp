// The `zero1_muon` optimizer plugin (optimizer.zero_stage 1): the muon plugin's update with its
// state sharded over data-parallel ranks (muon_optimizer.hpp); each matrix is orthogonalised whole
// on one owning rank, balanced by size, and the parameters are all-gathered after the step.
#include "muon_optimizer.hpp"

TRIAX_PLUGIN_LIBRARY(triax::optimizer_plugin<triax::plugins::MuonPlugin<TRIAX_GRADIENTS_DP_SHARDED>>(
    "zero1_muon", "1.0.0", "ZeRO-1 Muon: momenta, masters and AdamW moments sharded over data-parallel ranks"))
