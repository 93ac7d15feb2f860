// The qwen3 model plugin library: registers Qwen3Model under the name "qwen3".
#include "qwen3_model.hpp"
#include "triax/plugin.hpp"

TRIAX_PLUGIN_LIBRARY(triax::model_plugin<triax::qwen3::Qwen3Model>(
    "qwen3", "1.0.0",
    "Dense Qwen3 decoder (Hugging Face Qwen3ForCausalLM): GQA with qk-norm and an explicit head_dim, RoPE, SwiGLU, "
    "RMSNorm"))
