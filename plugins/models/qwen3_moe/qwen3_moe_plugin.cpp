// The qwen3_moe model plugin library: registers Qwen3MoeModel under the name "qwen3_moe".
#include "qwen3_moe_model.hpp"
#include "triax/plugin.hpp"

TRIAX_PLUGIN_LIBRARY(triax::model_plugin<triax::qwen3_moe::Qwen3MoeModel>(
    "qwen3_moe", "1.0.0",
    "Qwen3-MoE decoder (Hugging Face Qwen3MoeForCausalLM): GQA with qk-norm and an explicit head_dim, RoPE, top-k "
    "routed SwiGLU experts over ep"))
