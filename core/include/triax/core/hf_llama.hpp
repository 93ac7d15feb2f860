// Hugging Face Llama model folders (what LlamaForCausalLM.save_pretrained writes and
// from_pretrained reads): config.json, generation_config.json, and the weights as
// model.safetensors or as shards model-0000i-of-0000N.safetensors listed by
// model.safetensors.index.json. Tensor names are Hugging Face's, which are also triax's llama
// parameter names (model.embed_tokens.weight, model.layers.N.self_attn.q_proj.weight, ...,
// model.norm.weight, lm_head.weight). Both rotate halves of each head for RoPE, so the q/k
// projections need no permutation.
#pragma once

#include <ATen/core/Tensor.h>
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <string>

namespace triax {

struct HfLlamaModel {
  // triax llama model.model_config keys (what plugins/models/llama reads).
  YAML::Node model_config;
  // Every weight, whole (not sharded), on the CPU, in the dtype it was stored in. A tied model
  // has no lm_head.weight.
  std::map<std::string, at::Tensor> tensors;
  // The weights' dtype; when the stored dtypes differ, the one config.json names (else the
  // embedding's).
  at::ScalarType dtype;
};

// Reads a Hugging Face Llama folder. Refuses (naming config.json and the key) a model that is not
// LlamaForCausalLM or uses what triax's llama cannot represent; refuses (naming the file and the
// tensor) a missing tensor, a tensor of the wrong shape, an unexpected tensor, and weights that
// are not F32, BF16 or F16. A folder holding only pytorch_model.bin is asked to be converted to
// safetensors. Rotary inv_freq buffers some checkpoints carry are ignored; a tied model's
// lm_head.weight may be present only if it equals the embedding.
HfLlamaModel read_hf_llama(const std::string& folder);

// Writes a Hugging Face Llama folder that transformers' LlamaForCausalLM.from_pretrained loads.
// `tensors` holds exactly the model's weights (whole; lm_head.weight absent when tied, or equal
// to the embedding), converted one at a time to `dtype` (float32, bfloat16 or float16) as they are
// written. Weights larger than `max_shard_bytes` in total go into shards plus an index. The folder
// is built under a temporary name next to `folder` and renamed at the end: a failed export
// leaves nothing behind. `folder` must not exist yet, or be empty.
void write_hf_llama(const std::string& folder, const YAML::Node& model_config,
                    const std::map<std::string, at::Tensor>& tensors, at::ScalarType dtype, int64_t max_shard_bytes);

}  // namespace triax
