// The mamba model plugin library: registers MambaModel under the name "mamba".
#include "mamba_model.hpp"
#include "triax/plugin.hpp"

TRIAX_PLUGIN_LIBRARY(triax::model_plugin<triax::mamba::MambaModel>(
    "mamba", "1.0.0", "Mamba-1 selective state-space LM (Hugging Face MambaForCausalLM layout), no attention"))
