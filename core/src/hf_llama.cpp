#include "triax/core/hf_llama.hpp"

#include <ATen/ATen.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "triax/core/hf_llama_config.hpp"
#include "triax/core/safetensors.hpp"
#include "triax/durable_file.hpp"
#include "triax/error.hpp"
#include "triax/tensor_text.hpp"

namespace triax {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr const char* kEmbedding = "model.embed_tokens.weight";
constexpr const char* kLmHead = "lm_head.weight";

bool is_weight_dtype(at::ScalarType dtype) {
  return dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf;
}

// Older checkpoints carry the rotary frequencies as a buffer; they follow from config.json.
bool is_rotary_buffer(const std::string& name) {
  const std::string prefix = "model.layers.";
  const std::string suffix = ".self_attn.rotary_emb.inv_freq";
  return name.size() > prefix.size() + suffix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The safetensors files of a folder, and which of them holds each tensor.
struct WeightFiles {
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::map<std::string, const SafetensorsFile*> holder;
};

WeightFiles open_single(const fs::path& path) {
  WeightFiles out;
  out.files.push_back(std::make_unique<SafetensorsFile>(path.string()));
  for (const std::string& name : out.files.back()->names()) out.holder[name] = out.files.back().get();
  return out;
}

// model.safetensors.index.json: {"metadata": {...}, "weight_map": {"<tensor>": "<shard file>"}}. The
// index and the shards must agree exactly.
WeightFiles open_sharded(const fs::path& folder, const fs::path& index_path) {
  const std::string index = index_path.string();
  std::ifstream in(index);
  if (!in) throw Error(index + ": cannot open");
  Json root;
  try {
    root = Json::parse(in);
  } catch (const Json::exception& e) {
    throw Error(index + ": not valid JSON: " + e.what());
  }
  if (!root.is_object() || !root.contains("weight_map") || !root["weight_map"].is_object())
    throw Error(index + ": expected an object with a weight_map object");

  std::map<std::string, std::string> shard_of;
  std::vector<std::string> shards;  // in first-mention order
  for (const auto& [tensor, file] : root["weight_map"].items()) {
    if (!file.is_string())
      throw Error(index + ": weight_map['" + tensor + "']: expected a file name, found " + file.dump());
    const std::string name = file.get<std::string>();
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos)
      throw Error(index + ": weight_map['" + tensor + "']: '" + name + "' is not a file name in the folder");
    shard_of[tensor] = name;
    if (std::find(shards.begin(), shards.end(), name) == shards.end()) shards.push_back(name);
  }

  WeightFiles out;
  for (const std::string& shard : shards) {
    const fs::path path = folder / shard;
    if (!fs::exists(path)) throw Error(index + ": names shard " + shard + ", which does not exist in the folder");
    out.files.push_back(std::make_unique<SafetensorsFile>(path.string()));
    const SafetensorsFile* file = out.files.back().get();
    for (const std::string& tensor : file->names()) {
      auto listed = shard_of.find(tensor);
      if (listed == shard_of.end())
        throw Error(file->path() + ": tensor '" + tensor + "' is not listed in " + kIndexFile);
      if (listed->second != shard)
        throw Error(file->path() + ": tensor '" + tensor + "' is listed in " + kIndexFile + " for " + listed->second);
      out.holder[tensor] = file;
    }
  }
  for (const auto& [tensor, shard] : shard_of)
    if (!out.holder.count(tensor))
      throw Error((folder / shard).string() + ": tensor '" + tensor + "' listed in " + kIndexFile + " is missing");
  return out;
}

WeightFiles open_weights(const fs::path& folder) {
  const bool single = fs::exists(folder / kSingleFile);
  const bool sharded = fs::exists(folder / kIndexFile);
  if (single && sharded)
    throw Error(folder.string() + ": holds both " + kSingleFile + " and " + kIndexFile + "; keep one of them");
  if (single) return open_single(folder / kSingleFile);
  if (sharded) return open_sharded(folder, folder / kIndexFile);
  for (const char* pickle : {"pytorch_model.bin", "pytorch_model.bin.index.json"})
    if (fs::exists(folder / pickle))
      throw Error((folder / pickle).string() +
                  ": PyTorch pickle weights are not read by triax; convert the folder to safetensors first "
                  "(LlamaForCausalLM.from_pretrained(folder).save_pretrained(new_folder) writes safetensors)");
  throw Error(folder.string() + ": no weights (expected " + kSingleFile + " or " + kIndexFile + ")");
}

// Tensors in model order, grouped into files of at most max_shard_bytes each (a tensor larger than
// that gets a file of its own, as transformers does).
std::vector<std::vector<std::string>> plan_shards(
    const std::vector<std::pair<std::string, std::vector<int64_t>>>& shapes, at::ScalarType dtype,
    int64_t max_shard_bytes, int64_t& total) {
  std::vector<std::vector<std::string>> shards(1);
  int64_t in_shard = 0;
  total = 0;
  for (const auto& [name, shape] : shapes) {
    int64_t bytes = static_cast<int64_t>(c10::elementSize(dtype));
    for (int64_t dim : shape) bytes *= dim;
    if (!shards.back().empty() && in_shard + bytes > max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(name);
    in_shard += bytes;
    total += bytes;
  }
  return shards;
}

std::string shard_name(size_t index, size_t count) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return name;
}

}  // namespace

HfLlamaModel read_hf_llama(const std::string& folder) {
  const fs::path dir(folder);
  if (!fs::is_directory(dir)) throw Error(folder + ": not a folder (expected a Hugging Face model folder)");
  const HfLlamaConfig config = HfLlamaConfig::from_config_json((dir / "config.json").string());
  const WeightFiles weights = open_weights(dir);
  const std::string config_name = (dir / "config.json").string();

  // Names, dtypes and shapes first: a bad folder is refused before any weight is copied.
  const auto expected = config.tensor_shapes();
  std::set<std::string> expected_names;
  std::map<at::ScalarType, int64_t> bytes_per_dtype;
  for (const auto& [name, shape] : expected) {
    expected_names.insert(name);
    auto found = weights.holder.find(name);
    if (found == weights.holder.end()) {
      const std::string where = weights.files.size() == 1 ? weights.files[0]->path() : (dir / kIndexFile).string();
      throw Error(where + ": tensor '" + name + "' is missing (" + config_name + " implies shape " +
                  shape_text(shape) + (name == kLmHead ? " and tie_word_embeddings: false)" : ")"));
    }
    const SafetensorsFile& file = *found->second;
    if (!is_weight_dtype(file.dtype(name)))
      throw Error(file.path() + ": tensor '" + name + "': dtype " + safetensors_dtype_name(file.dtype(name)) +
                  " is not supported for weights (expected F32, BF16 or F16)");
    if (file.shape(name) != shape)
      throw Error(file.path() + ": tensor '" + name + "' has shape " + shape_text(file.shape(name)) + ", but " +
                  config_name + " implies " + shape_text(shape));
    bytes_per_dtype[file.dtype(name)] += file.nbytes(name);
  }
  bool tied_head_present = false;
  for (const auto& [name, file] : weights.holder) {
    if (expected_names.count(name) || is_rotary_buffer(name)) continue;
    if (name == kLmHead && config.tie_word_embeddings) {
      tied_head_present = true;
      continue;
    }
    throw Error(file->path() + ": unexpected tensor '" + name + "' (not part of the Llama model " + config_name +
                " describes)");
  }

  HfLlamaModel model;
  model.model_config = config.to_model_config();
  for (const auto& [name, shape] : expected) model.tensors[name] = weights.holder.at(name)->read(name);
  if (tied_head_present) {
    const SafetensorsFile& file = *weights.holder.at(kLmHead);
    const at::Tensor& embedding = model.tensors.at(kEmbedding);
    if (file.shape(kLmHead) != embedding.sizes().vec() || file.dtype(kLmHead) != embedding.scalar_type() ||
        !at::equal(file.read(kLmHead), embedding))
      throw Error(file.path() + ": tensor 'lm_head.weight' differs from model.embed_tokens.weight, but " + config_name +
                  " says tie_word_embeddings: true");
  }
  if (bytes_per_dtype.size() == 1)
    model.dtype = bytes_per_dtype.begin()->first;
  else
    model.dtype = config.dtype.value_or(model.tensors.at(kEmbedding).scalar_type());
  return model;
}

void write_hf_llama(const std::string& folder, const YAML::Node& model_config,
                    const std::map<std::string, at::Tensor>& tensors, at::ScalarType dtype, int64_t max_shard_bytes) {
  const HfLlamaConfig config = HfLlamaConfig::from_model_config(model_config);
  auto fail = [&](const std::string& message) { throw Error(folder + ": " + message); };
  if (!is_weight_dtype(dtype))
    fail(std::string("cannot export weights as ") + c10::toString(dtype) + " (expected float32, bfloat16 or float16)");
  if (max_shard_bytes <= 0) fail("the shard size limit must be positive, got " + std::to_string(max_shard_bytes));

  // Exactly the model's tensors, whole.
  const auto shapes = config.tensor_shapes();
  std::set<std::string> expected_names;
  for (const auto& [name, shape] : shapes) {
    expected_names.insert(name);
    auto found = tensors.find(name);
    if (found == tensors.end() || !found->second.defined()) fail("tensor '" + name + "' is missing");
    const at::Tensor& tensor = found->second;
    if (!at::isFloatingType(tensor.scalar_type()))
      fail("tensor '" + name + "' has dtype " + c10::toString(tensor.scalar_type()) + ", expected a floating type");
    if (tensor.sizes().vec() != shape)
      fail("tensor '" + name + "' has shape " + shape_text(tensor.sizes()) + ", but the model_config implies " +
           shape_text(shape));
  }
  for (const auto& [name, tensor] : tensors) {
    if (expected_names.count(name)) continue;
    if (name == kLmHead && config.tie_word_embeddings) {
      const at::Tensor& embedding = tensors.at(kEmbedding);
      if (tensor.sizes() != embedding.sizes() ||
          !at::equal(tensor.to(embedding.device(), embedding.scalar_type()), embedding))
        fail("tensor 'lm_head.weight' differs from model.embed_tokens.weight, but tie_word_embeddings is true");
      continue;
    }
    fail("unexpected tensor '" + name + "' (not part of the Llama model the model_config describes)");
  }
  const std::string config_json = config.to_config_json(dtype);

  // Build next to the target, rename at the end.
  const fs::path target = fs::absolute(fs::path(folder)).lexically_normal();
  const fs::path name = target.filename().empty() ? target.parent_path().filename() : target.filename();
  const fs::path parent = target.filename().empty() ? target.parent_path().parent_path() : target.parent_path();
  std::error_code ec;
  if (fs::exists(target, ec) && !(fs::is_directory(target, ec) && fs::is_empty(target, ec)))
    fail("already exists and is not an empty folder; choose a new folder or remove it");
  fs::create_directories(parent, ec);
  if (ec) fail("cannot create the parent folder: " + ec.message());
  std::string pattern = (parent / ("." + name.string() + ".tmp-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr)
    fail("cannot create a temporary folder in " + parent.string() + ": " + std::strerror(errno));
  const fs::path temporary(pattern);

  try {
    write_file_durably(temporary / "config.json", config_json);
    write_file_durably(temporary / "generation_config.json", config.to_generation_config_json());

    int64_t total_bytes = 0;
    const auto shards = plan_shards(shapes, dtype, max_shard_bytes, total_bytes);
    std::map<std::string, std::vector<int64_t>> shape_of(shapes.begin(), shapes.end());
    Json weight_map = Json::object();
    for (size_t s = 0; s < shards.size(); ++s) {
      const std::string file = shards.size() == 1 ? kSingleFile : shard_name(s, shards.size());
      std::vector<SafetensorsEntry> entries;
      for (const std::string& tensor : shards[s]) {
        entries.push_back({tensor, dtype, shape_of.at(tensor)});
        weight_map[tensor] = file;
      }
      write_safetensors((temporary / file).string(), entries,
                        [&](size_t i) { return tensors.at(entries[i].name).detach().to(dtype); }, {{"format", "pt"}});
    }
    if (shards.size() > 1) {
      const Json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", weight_map}};
      write_file_durably(temporary / kIndexFile, index.dump(2) + "\n");
    }
    rename_durably(temporary, target);
  } catch (...) {
    fs::remove_all(temporary, ec);
    throw;
  }
}

}  // namespace triax
