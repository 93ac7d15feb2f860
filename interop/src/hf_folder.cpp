#include "triax/interop/hf_folder.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "triax/interop/durable_file.hpp"
#include "triax/error.hpp"

namespace triax::interop {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

Json parse_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open");
  try {
    return Json::parse(in);
  } catch (const Json::exception& e) {
    throw Error(path + ": not valid JSON: " + e.what());
  }
}


// Entries in order, grouped into files of at most max_shard_bytes each (a tensor larger than that
// gets a file of its own, as transformers does).
std::vector<std::vector<size_t>> plan_shards(const std::vector<SafetensorsEntry>& entries, int64_t max_shard_bytes,
                                             int64_t& total) {
  std::vector<std::vector<size_t>> shards(1);
  int64_t in_shard = 0;
  total = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    int64_t bytes = static_cast<int64_t>(c10::elementSize(entries[i].dtype));
    for (int64_t dim : entries[i].shape) bytes *= dim;
    if (!shards.back().empty() && in_shard + bytes > max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(i);
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

bool is_hf_folder(const std::string& path) {
  const fs::path folder(path);
  return fs::exists(folder / kHfConfigFile) && (fs::exists(folder / kSingleFile) || fs::exists(folder / kIndexFile) ||
                                                fs::exists(folder / "pytorch_model.bin"));
}

bool is_hf_weight_dtype(at::ScalarType dtype) {
  return dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf;
}

std::string read_hf_config(const std::string& folder) {
  if (!fs::is_directory(folder)) throw Error(folder + ": not a folder (expected a Hugging Face model folder)");
  const std::string path = (fs::path(folder) / kHfConfigFile).string();
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open (a Hugging Face model folder needs config.json)");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> hf_architectures(const std::string& config_json, const std::string& origin) {
  Json root;
  try {
    root = Json::parse(config_json);
  } catch (const Json::exception& e) {
    throw Error(origin + ": not valid JSON: " + e.what());
  }
  if (!root.is_object()) throw Error(origin + ": expected a JSON object");
  std::vector<std::string> out;
  if (root.contains("architectures") && root["architectures"].is_array())
    for (const Json& name : root["architectures"])
      if (name.is_string()) out.push_back(name.get<std::string>());
  return out;
}

std::optional<at::ScalarType> hf_declared_dtype(const std::string& config_json) {
  const Json root = Json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  for (const char* key : {"dtype", "torch_dtype"}) {
    if (!root.is_object() || !root.contains(key) || !root[key].is_string()) continue;
    const std::string name = root[key].get<std::string>();
    if (name == "float32") return at::kFloat;
    if (name == "bfloat16") return at::kBFloat16;
    if (name == "float16") return at::kHalf;
  }
  return std::nullopt;
}

HfWeights::HfWeights(const std::string& folder_name) {
  const fs::path folder(folder_name);
  const bool single = fs::exists(folder / kSingleFile);
  const bool sharded = fs::exists(folder / kIndexFile);
  if (single && sharded)
    throw Error(folder.string() + ": holds both " + kSingleFile + " and " + kIndexFile + "; keep one of them");
  if (single) {
    files_.push_back(std::make_unique<SafetensorsFile>((folder / kSingleFile).string()));
    for (const std::string& name : files_.back()->names()) holder_[name] = files_.back().get();
    where_ = files_.back()->path();
    return;
  }
  if (!sharded) {
    for (const char* pickle : {"pytorch_model.bin", "pytorch_model.bin.index.json"})
      if (fs::exists(folder / pickle))
        throw Error((folder / pickle).string() +
                    ": PyTorch pickle weights are not read by triax; convert the folder to safetensors first "
                    "(from_pretrained(folder).save_pretrained(new_folder) writes safetensors)");
    throw Error(folder.string() + ": no weights (expected " + kSingleFile + " or " + kIndexFile + ")");
  }

  // {"metadata": {...}, "weight_map": {"<tensor>": "<shard file>"}}: index and shards agree exactly.
  const std::string index = (folder / kIndexFile).string();
  where_ = index;
  const Json root = parse_json_file(index);
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
  for (const std::string& shard : shards) {
    const fs::path path = folder / shard;
    if (!fs::exists(path)) throw Error(index + ": names shard " + shard + ", which does not exist in the folder");
    files_.push_back(std::make_unique<SafetensorsFile>(path.string()));
    const SafetensorsFile* file = files_.back().get();
    for (const std::string& tensor : file->names()) {
      auto listed = shard_of.find(tensor);
      if (listed == shard_of.end())
        throw Error(file->path() + ": tensor '" + tensor + "' is not listed in " + kIndexFile);
      if (listed->second != shard)
        throw Error(file->path() + ": tensor '" + tensor + "' is listed in " + kIndexFile + " for " + listed->second);
      holder_[tensor] = file;
    }
  }
  for (const auto& [tensor, shard] : shard_of)
    if (!holder_.count(tensor))
      throw Error((folder / shard).string() + ": tensor '" + tensor + "' listed in " + kIndexFile + " is missing");
}

std::vector<std::string> HfWeights::names() const {
  std::vector<std::string> out;
  for (const auto& [name, file] : holder_) out.push_back(name);
  return out;
}

const SafetensorsFile* HfWeights::find(const std::string& name) const {
  auto it = holder_.find(name);
  return it == holder_.end() ? nullptr : it->second;
}

void write_hf_folder(const std::string& folder, const HfFolderContents& contents) {
  auto fail = [&](const std::string& message) { throw Error(folder + ": " + message); };
  if (contents.max_shard_bytes <= 0)
    fail("the shard size limit must be positive, got " + std::to_string(contents.max_shard_bytes));
  for (const SafetensorsEntry& entry : contents.tensors)
    if (!is_hf_weight_dtype(entry.dtype))
      fail(std::string("cannot write weights as ") + c10::toString(entry.dtype) +
           " (expected float32, bfloat16 or float16)");

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
    write_file_durably(temporary / kHfConfigFile, contents.config_json);
    write_file_durably(temporary / "generation_config.json", contents.generation_config_json);
    int64_t total_bytes = 0;
    const auto shards = plan_shards(contents.tensors, contents.max_shard_bytes, total_bytes);
    Json weight_map = Json::object();
    for (size_t s = 0; s < shards.size(); ++s) {
      const std::string file = shards.size() == 1 ? kSingleFile : shard_name(s, shards.size());
      std::vector<SafetensorsEntry> entries;
      for (size_t i : shards[s]) {
        entries.push_back(contents.tensors[i]);
        weight_map[contents.tensors[i].name] = file;
      }
      write_safetensors((temporary / file).string(), entries,
                        [&](size_t i) { return contents.tensor_of(shards[s][i]); }, {{"format", "pt"}});
    }
    if (shards.size() > 1) {
      const Json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", weight_map}};
      write_file_durably(temporary / kIndexFile, index.dump(2) + "\n");
    }
    sync_path(temporary);
    rename_durably(temporary, target);
  } catch (...) {
    fs::remove_all(temporary, ec);
    throw;
  }
}

}  // namespace triax::interop
