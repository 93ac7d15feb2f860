// The qwen2 model plugin library: registers Qwen2Model under the name "qwen2".
#include "qwen2_model.hpp"
#include "triax/plugin.hpp"

TRIAX_PLUGIN_LIBRARY(triax::model_plugin<triax::qwen2::Qwen2Model>(
    "qwen2", "1.0.0",
    "Dense Qwen2 decoder (Hugging Face Qwen2ForCausalLM; SmolLM3ForCausalLM with NoPE layers): GQA with q/k/v "
    "biases, RoPE, SwiGLU, RMSNorm, z-loss"))
