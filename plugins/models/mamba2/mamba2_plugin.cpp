// The mamba2 model plugin library: registers Mamba2Model under the name "mamba2".
#include "mamba2_model.hpp"
#include "triax/plugin.hpp"

TRIAX_PLUGIN_LIBRARY(triax::model_plugin<triax::mamba2::Mamba2Model>(
    "mamba2", "1.0.0", "Mamba-2 state-space LM with the chunked SSD scan (Hugging Face Mamba2ForCausalLM layout)"))
