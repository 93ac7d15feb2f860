// Hugging Face model folders, whatever the model (what save_pretrained writes and from_pretrained
// reads): config.json, generation_config.json, and the weights as model.safetensors or as shards
// model-0000i-of-0000N.safetensors listed by model.safetensors.index.json. Which tensors a model
// has and what config.json says is the model plugin's business (its tensor map, tensor_map.hpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "triax/interop/safetensors.hpp"

namespace triax::interop {

constexpr const char* kHfConfigFile = "config.json";

// A folder with config.json and Hugging Face weights (safetensors or pytorch_model.bin).
bool is_hf_folder(const std::string& path);

// The text of the folder's config.json; a missing folder or file is a triax::Error naming it.
std::string read_hf_config(const std::string& folder);
// config.json's "architectures" (empty when absent); a config.json that is not a JSON object is
// an error naming `origin`.
std::vector<std::string> hf_architectures(const std::string& config_json, const std::string& origin);
// The weights' dtype config.json declares ("torch_dtype" of transformers 4, "dtype" of 5), when
// it names float32, bfloat16 or float16.
std::optional<at::ScalarType> hf_declared_dtype(const std::string& config_json);

// float32, bfloat16 and float16: the dtypes Hugging Face weights are read and written in.
bool is_hf_weight_dtype(at::ScalarType dtype);

// The weight files of a folder, index and shards checked to agree. A folder holding only
// pytorch_model.bin is asked to be converted to safetensors.
class HfWeights {
 public:
  explicit HfWeights(const std::string& folder);

  // Every tensor name, sorted.
  std::vector<std::string> names() const;
  // The file holding `name`, or nullptr.
  const SafetensorsFile* find(const std::string& name) const;
  // What a message about a missing tensor names: the one file, or the index.
  const std::string& where() const { return where_; }

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> holder_;
  std::string where_;
};

// What write_hf_folder writes.
struct HfFolderContents {
  std::string config_json;
  std::string generation_config_json;
  std::vector<SafetensorsEntry> tensors;        // in file order
  std::function<at::Tensor(size_t)> tensor_of;  // entry i's values, in its dtype and shape
  int64_t max_shard_bytes = 5'000'000'000;      // weights above this go into shards plus an index
};

// Writes a folder that from_pretrained loads. It is built under a temporary name next to `folder`
// and renamed at the end: a failed write leaves nothing behind. `folder` must not exist yet, or
// be empty.
void write_hf_folder(const std::string& folder, const HfFolderContents& contents);

}  // namespace triax::interop
