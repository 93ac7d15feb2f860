// Between triax checkpoints and Hugging Face Llama folders (triax convert, model.init_method.path).
// The checkpoint side reads and writes whole tensors through the checkpoint store; the folder side
// is core/hf_llama.hpp. Parameter names are the same on both sides.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>

#include "triax/parameter.hpp"

namespace triax::checkpoint {

// A folder with config.json and Hugging Face weights (safetensors or pytorch_model.bin).
bool is_hf_folder(const std::string& path);

// Writes the model of `checkpoint` (a step folder, or a folder with `latest`) as a Hugging Face
// LlamaForCausalLM folder: weights in `dtype` (default: the checkpoint's parameter dtype), fp32
// masters used when the checkpoint has them; shards above `max_shard_bytes`.
void export_to_hf(const std::string& checkpoint, const std::string& out, std::optional<at::ScalarType> dtype,
                  int64_t max_shard_bytes);

// Writes a Hugging Face Llama folder as a triax checkpoint folder `out` (step_00000000 and
// `latest`): weights only, single-rank topology, for model.init_method.path (any topology).
// Returns the step folder written.
std::string import_from_hf(const std::string& hf_folder, const std::string& out);

// Copies the part of `whole` (the meaningful, unpadded tensor) that `target`'s shard covers into
// it; padding stays zero. A shape mismatch is an error naming `origin` and the tensor.
void copy_shard_from_whole(const NamedParameter& target, const at::Tensor& whole, const std::string& origin);

}  // namespace triax::checkpoint
