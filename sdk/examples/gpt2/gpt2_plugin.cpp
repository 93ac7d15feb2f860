// The plugin library: registers Gpt2Model as the model plugin "gpt2".
#include <triax/plugin.hpp>

#include "gpt2_model.hpp"

TRIAX_PLUGIN_LIBRARY(triax::model_plugin<gpt2::Gpt2Model>(
    "gpt2", "1.0.0", "GPT-2 (Hugging Face GPT2LMHeadModel): learned positions, LayerNorm, GELU MLP, tied embeddings"))
