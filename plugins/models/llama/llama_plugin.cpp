// The llama model plugin library: registers LlamaModel under the name "llama".
#include "llama_model.hpp"
#include "triax/plugin.hpp"

TRIAX_PLUGIN_LIBRARY(triax::model_plugin<triax::llama::LlamaModel>(
    "llama", "1.0.0", "Llama decoder (Hugging Face LlamaForCausalLM layout): GQA, RoPE, SwiGLU, RMSNorm"))
