// The moe model plugin library: registers MoeModel under the name "moe".
#include "moe_model.hpp"
#include "triax/plugin.hpp"

TRIAX_PLUGIN_LIBRARY(triax::model_plugin<triax::moe::MoeModel>(
    "moe", "1.0.0",
    "mixture-of-experts decoder (Mixtral / Qwen2-MoE layout): GQA, RoPE, top-k routed SwiGLU experts over ep"))
