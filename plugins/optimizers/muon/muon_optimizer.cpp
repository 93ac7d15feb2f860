// The `muon` optimizer plugin: Muon for the hidden matrices, AdamW for the rest, over whole
// parameters (muon_optimizer.hpp); each matrix split over tensor-parallel ranks is put together
// and orthogonalised on one of them.
#include "muon_optimizer.hpp"

TRIAX_PLUGIN_LIBRARY(triax::optimizer_plugin<triax::plugins::MuonPlugin<TRIAX_GRADIENTS_WHOLE>>(
    "muon", "1.0.0", "Muon (Newton-Schulz orthogonalised momentum) for hidden matrices, AdamW for the rest"))
