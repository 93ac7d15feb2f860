// A model's Hugging Face mapping, in C++: which config.json architectures it reads and writes,
// how config.json and model.model_config translate into each other, and its tensor map (the
// triax_hf_tensor_rule list of abi.h). A model class offers one with
//
//   static triax::HfMapping hf_mapping();
//
// and the SDK (triax/plugin.hpp) turns it into the vtable's `hf` member. The host applies the
// tensor map and does every file's I/O; a plugin only describes.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "triax/abi.h"
#include "triax/config_reader.hpp"

namespace triax {

// One rule of a tensor map (triax_hf_tensor_rule): how one whole parameter relates to HF tensors.
struct HfTensorRule {
  triax_hf_rule_kind kind = TRIAX_HF_RENAME;
  std::string triax_name;      // empty for TRIAX_HF_IGNORE
  std::vector<int64_t> shape;  // the parameter's whole, meaningful shape
  int32_t dim = 0;             // CONCAT / STACK
  std::vector<std::string> hf_names;
  std::vector<int64_t> hf_sizes;  // CONCAT / INTERLEAVE: each HF part's extent along dim
  bool optional = false;          // reading: may be absent, or equal another rule's parameter (tied)

  // The HF tensor `hf_name` (default: the parameter's own name) holds the parameter as it is.
  static HfTensorRule rename(std::string triax_name, std::vector<int64_t> shape, std::string hf_name = "");
  // The HF tensors, concatenated along dim in order, make the parameter (fused q/k/v, gate/up).
  static HfTensorRule concat(std::string triax_name, std::vector<int64_t> shape, int32_t dim,
                             std::vector<std::string> hf_names, std::vector<int64_t> hf_sizes);
  // The HF tensors, stacked along a new dimension dim, make the parameter (E experts).
  static HfTensorRule stack(std::string triax_name, std::vector<int64_t> shape, int32_t dim,
                            std::vector<std::string> hf_names);
  // Since ABI 1.5: as concat along dim >= 1, but each HF tensor is its part with dims 0 .. dim
  // merged (q_proj, k_proj, v_proj <-> q/k/v grouped by key/value head, QkvLayout). A name given
  // for several consecutive parts is one HF tensor of those parts, one after another along dim 0.
  static HfTensorRule interleave(std::string triax_name, std::vector<int64_t> shape, int32_t dim,
                                 std::vector<std::string> hf_names, std::vector<int64_t> hf_sizes);
  // HF tensors matching any of the globs ('*' = any run of characters) are skipped.
  static HfTensorRule ignore(std::vector<std::string> hf_globs);
  // The same rule, optional.
  HfTensorRule as_optional() const;

  // Host side: a copy of a rule a plugin handed over; a malformed one is a triax::Error.
  static HfTensorRule from_c(const triax_hf_tensor_rule& rule);
};

struct HfMapping {
  // config.json "architectures" read; the first is the one written.
  std::vector<std::string> architectures;
  // config.json, read strictly through `config_json` (errors name config.json and the key) ->
  // model.model_config. Refuses what the model cannot represent.
  std::function<YAML::Node(ConfigReader& config_json)> config_from_hf;
  // model.model_config -> the text of config.json for weights of `dtype` ("bfloat16", ...).
  // generation_config.json follows from it (its bos, eos and pad token ids).
  std::function<std::string(ConfigReader& model_config, const std::string& dtype)> config_to_hf;
  // Every rule of the model model_config describes, parameters in model order.
  std::function<std::vector<HfTensorRule>(ConfigReader& model_config)> tensor_map;
};

// ---- the rules that end a causal LM's tensor map -------------------------------------------------

// Appends the head's rule: untied, lm_head.weight of `shape` ([vocab, hidden]) as it is; tied, the
// head has no tensor of its own, but a tied checkpoint may still hold lm_head.weight: an optional
// rule reads it as `embedding`, which it must equal. Then, when `ignored_buffers` names any, one
// rule skipping those globs: buffers older checkpoints carry that config.json implies.
void add_hf_head_rules(std::vector<HfTensorRule>& rules, const std::string& embedding,
                       const std::vector<int64_t>& shape, bool tied, std::vector<std::string> ignored_buffers = {});

// ---- key translation tables: most config.json keys have a model_config key of their own -------

enum class HfValue {
  Integer,
  Number,
  Boolean,
  String,
  TokenId  // an integer or null; config.json may also hold a list of one
};

// A config.json key and the model_config key holding the same value (the same name by default).
struct HfConfigKey {
  HfConfigKey(std::string hf_key, HfValue type, std::string triax_key = "")
      : hf(std::move(hf_key)), triax(triax_key.empty() ? hf : std::move(triax_key)), type(type) {}
  std::string hf;
  std::string triax;
  HfValue type;
};

// config.json -> model_config: each key of `keys` present in config.json, checked for its type, is
// written into model_config (numbers in a spelling every YAML reader takes for a number).
void hf_keys_to_model_config(ConfigReader& config_json, const std::vector<HfConfigKey>& keys, YAML::Node& model_config);
// model_config (as the model's reader resolved it, every key present) -> config.json, typed.
void model_config_keys_to_hf(const YAML::Node& model_config, const std::vector<HfConfigKey>& keys,
                             nlohmann::json& config_json);
// Refuses a config.json whose "architectures" names none of `architectures`.
void require_hf_architecture(ConfigReader& config_json, const std::vector<std::string>& architectures);
// Refuses a config.json key whose value, when present, is not `expected` (a feature the model lacks).
void require_hf_value(ConfigReader& config_json, const std::string& key, const std::string& expected,
                      const std::string& why);
// The shortest YAML text that reads back to the same double in YAML 1.1 and 1.2 readers ("1.0e-05").
std::string yaml_number(double value);

namespace detail {
// The C entry points of an HfMapping (the adapter of triax/plugin.hpp calls these).
triax_status hf_config_from_hf(const HfMapping& mapping, const char* config_json, const triax_text_sink* out,
                               triax_error* error);
triax_status hf_config_to_hf(const HfMapping& mapping, const char* model_config_yaml, const char* dtype,
                             const triax_text_sink* config_json, const triax_text_sink* generation_config_json,
                             triax_error* error);
triax_status hf_tensor_map(const HfMapping& mapping, const char* model_config_yaml, const triax_hf_rule_sink* sink,
                           triax_error* error);

template <class M>
struct HfAdapter {
  static const HfMapping& mapping() {
    static const HfMapping instance = M::hf_mapping();
    return instance;
  }
  static triax_status config_from_hf(const char* json, const triax_text_sink* out, triax_error* error) {
    return hf_config_from_hf(mapping(), json, out, error);
  }
  static triax_status config_to_hf(const char* yaml, const char* dtype, const triax_text_sink* config_json,
                                   const triax_text_sink* generation_config_json, triax_error* error) {
    return hf_config_to_hf(mapping(), yaml, dtype, config_json, generation_config_json, error);
  }
  static triax_status tensor_map(const char* yaml, const triax_hf_rule_sink* sink, triax_error* error) {
    return hf_tensor_map(mapping(), yaml, sink, error);
  }
  static const triax_model_hf_vtable* vtable() {
    static const std::vector<const char*> names = [] {
      std::vector<const char*> out;
      for (const std::string& name : mapping().architectures) out.push_back(name.c_str());
      return out;
    }();
    static const triax_model_hf_vtable table = [] {
      triax_model_hf_vtable t{};
      t.struct_size = sizeof(t);
      t.architecture_count = static_cast<int32_t>(names.size());
      t.architectures = names.data();
      t.config_from_hf = config_from_hf;
      t.config_to_hf = config_to_hf;
      t.tensor_map = tensor_map;
      return t;
    }();
    return &table;
  }
};
}  // namespace detail

}  // namespace triax
