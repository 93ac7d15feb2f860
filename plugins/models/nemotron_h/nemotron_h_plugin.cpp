// The nemotron_h model plugin library: registers NemotronHModel under the name "nemotron_h".
#include "nemotron_h_model.hpp"
#include "triax/plugin.hpp"

TRIAX_PLUGIN_LIBRARY(triax::model_plugin<triax::nemotron_h::NemotronHModel>(
    "nemotron_h", "1.0.0",
    "Nemotron-H hybrid LM (Hugging Face NemotronHForCausalLM): Mamba-2, attention, relu² MLP and MoE layers by "
    "hybrid_override_pattern"))
