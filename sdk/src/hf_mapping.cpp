// The generic half of Hugging Face mappings: tensor rules in and out of their C form, config.json
// read as a strict ConfigReader, key translation tables, and the C entry points the adapter of
// triax/plugin.hpp hands to the host.
#include "triax/hf_mapping.hpp"

#include <nlohmann/json.hpp>

#include "triax/error.hpp"
#include "triax/plugin.hpp"

namespace triax {
namespace {

using Json = nlohmann::json;

// config.json as YAML, value by value, so that model plugins read it with their usual strict reader.
YAML::Node yaml_of(const Json& value) {
  switch (value.type()) {
    case Json::value_t::object: {
      YAML::Node out(YAML::NodeType::Map);
      for (const auto& [key, item] : value.items()) out[key] = yaml_of(item);
      return out;
    }
    case Json::value_t::array: {
      YAML::Node out(YAML::NodeType::Sequence);
      for (const Json& item : value) out.push_back(yaml_of(item));
      return out;
    }
    case Json::value_t::null:
      return YAML::Node(YAML::NodeType::Null);
    case Json::value_t::boolean:
      return YAML::Node(value.get<bool>() ? "true" : "false");
    case Json::value_t::number_float:
      return YAML::Node(yaml_number(value.get<double>()));
    case Json::value_t::string:
      return YAML::Node(value.get<std::string>());
    default:  // integers
      return YAML::Node(value.dump());
  }
}

void append(const triax_text_sink* sink, const std::string& text) {
  if (sink == nullptr || sink->append == nullptr) throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "no text sink given");
  sink->append(sink->self, text.data(), text.size());
}

bool same_value(const std::string& found, const std::string& expected) {
  if (found == expected) return true;
  try {
    size_t a = 0, b = 0;
    const double x = std::stod(found, &a), y = std::stod(expected, &b);
    return a == found.size() && b == expected.size() && x == y;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

std::string yaml_number(double value) {
  std::string text = Json(value).dump();
  const size_t exponent = text.find_first_of("eE");
  if (exponent != std::string::npos && text.find('.') == std::string::npos) text.insert(exponent, ".0");
  return text;
}

HfTensorRule HfTensorRule::rename(std::string triax_name, std::vector<int64_t> shape, std::string hf_name) {
  HfTensorRule r;
  r.kind = TRIAX_HF_RENAME;
  r.hf_names = {hf_name.empty() ? triax_name : std::move(hf_name)};
  r.triax_name = std::move(triax_name);
  r.shape = std::move(shape);
  return r;
}

HfTensorRule HfTensorRule::concat(std::string triax_name, std::vector<int64_t> shape, int32_t dim,
                                  std::vector<std::string> hf_names, std::vector<int64_t> hf_sizes) {
  HfTensorRule r;
  r.kind = TRIAX_HF_CONCAT;
  r.triax_name = std::move(triax_name);
  r.shape = std::move(shape);
  r.dim = dim;
  r.hf_names = std::move(hf_names);
  r.hf_sizes = std::move(hf_sizes);
  return r;
}

HfTensorRule HfTensorRule::interleave(std::string triax_name, std::vector<int64_t> shape, int32_t dim,
                                      std::vector<std::string> hf_names, std::vector<int64_t> hf_sizes) {
  HfTensorRule r = concat(std::move(triax_name), std::move(shape), dim, std::move(hf_names), std::move(hf_sizes));
  r.kind = TRIAX_HF_INTERLEAVE;
  return r;
}

HfTensorRule HfTensorRule::stack(std::string triax_name, std::vector<int64_t> shape, int32_t dim,
                                 std::vector<std::string> hf_names) {
  HfTensorRule r;
  r.kind = TRIAX_HF_STACK;
  r.triax_name = std::move(triax_name);
  r.shape = std::move(shape);
  r.dim = dim;
  r.hf_names = std::move(hf_names);
  return r;
}

HfTensorRule HfTensorRule::ignore(std::vector<std::string> hf_globs) {
  HfTensorRule r;
  r.kind = TRIAX_HF_IGNORE;
  r.hf_names = std::move(hf_globs);
  return r;
}

HfTensorRule HfTensorRule::as_optional() const {
  HfTensorRule r = *this;
  r.optional = true;
  return r;
}

HfTensorRule HfTensorRule::from_c(const triax_hf_tensor_rule& c) {
  const std::string what = "tensor rule for '" + std::string(c.triax_name ? c.triax_name : "(ignored)") + "'";
  if (c.struct_size < offsetof(triax_hf_tensor_rule, optional) + sizeof(c.optional))
    throw Error(what + ": struct_size " + std::to_string(c.struct_size) + " is smaller than ABI 1.3's");
  if (c.kind < TRIAX_HF_RENAME || c.kind > TRIAX_HF_INTERLEAVE)
    throw Error(what + ": unknown kind " + std::to_string(c.kind) +
                " (0 rename, 1 concat, 2 stack, 3 ignore, 4 flatten, 5 interleave)");
  if (c.hf_count <= 0 || c.hf_names == nullptr) throw Error(what + ": names no Hugging Face tensor");
  HfTensorRule r;
  r.kind = static_cast<triax_hf_rule_kind>(c.kind);
  r.optional = c.optional != 0;
  for (int32_t i = 0; i < c.hf_count; ++i) {
    if (c.hf_names[i] == nullptr || *c.hf_names[i] == '\0') throw Error(what + ": an empty Hugging Face name");
    r.hf_names.emplace_back(c.hf_names[i]);
  }
  if (r.kind == TRIAX_HF_IGNORE) return r;
  if (c.triax_name == nullptr || *c.triax_name == '\0') throw Error(what + ": no parameter name");
  if (c.ndim < 0 || c.ndim > TRIAX_MAX_TENSOR_DIMS || (c.ndim > 0 && c.shape == nullptr))
    throw Error(what + ": ndim " + std::to_string(c.ndim) + " without a shape of that many dimensions");
  r.triax_name = c.triax_name;
  r.shape.assign(c.shape, c.shape + c.ndim);
  r.dim = c.dim;
  if (r.kind == TRIAX_HF_CONCAT || r.kind == TRIAX_HF_INTERLEAVE) {
    if (c.hf_sizes == nullptr) throw Error(what + ": a concatenation without hf_sizes");
    r.hf_sizes.assign(c.hf_sizes, c.hf_sizes + c.hf_count);
  }
  return r;
}

void add_hf_head_rules(std::vector<HfTensorRule>& rules, const std::string& embedding,
                       const std::vector<int64_t>& shape, bool tied, std::vector<std::string> ignored_buffers) {
  if (tied)
    rules.push_back(HfTensorRule::rename(embedding, shape, "lm_head.weight").as_optional());
  else
    rules.push_back(HfTensorRule::rename("lm_head.weight", shape));
  if (!ignored_buffers.empty()) rules.push_back(HfTensorRule::ignore(std::move(ignored_buffers)));
}

void hf_keys_to_model_config(ConfigReader& config_json, const std::vector<HfConfigKey>& keys,
                             YAML::Node& model_config) {
  for (const HfConfigKey& key : keys) {
    switch (key.type) {
      case HfValue::Integer:
        if (auto v = config_json.optional<int64_t>(key.hf)) model_config[key.triax] = *v;
        break;
      case HfValue::Number:
        if (auto v = config_json.optional<double>(key.hf)) model_config[key.triax] = yaml_number(*v);
        break;
      case HfValue::Boolean:
        if (auto v = config_json.optional<bool>(key.hf)) model_config[key.triax] = *v;
        break;
      case HfValue::String:
        if (auto v = config_json.optional<std::string>(key.hf)) model_config[key.triax] = *v;
        break;
      case HfValue::TokenId: {
        const YAML::Node raw = config_json.raw(key.hf);
        if (!raw.IsDefined()) break;
        const YAML::Node value = raw.IsSequence() && raw.size() == 1 ? raw[0] : raw;
        if (value.IsNull()) {
          model_config[key.triax] = YAML::Node(YAML::NodeType::Null);
        } else if (value.IsScalar() && value.Scalar().find_first_not_of("0123456789") == std::string::npos) {
          model_config[key.triax] = value.as<int64_t>();
        } else {
          config_json.fail(key.hf,
                           "expected one token id (an integer or null): model_config holds a single " + key.triax);
        }
        break;
      }
    }
  }
}

void model_config_keys_to_hf(const YAML::Node& model_config, const std::vector<HfConfigKey>& keys,
                             nlohmann::json& config_json) {
  for (const HfConfigKey& key : keys) {
    const YAML::Node value = model_config[key.triax];
    if (!value.IsDefined()) continue;
    if (value.IsNull()) {
      config_json[key.hf] = nullptr;
      continue;
    }
    try {
      switch (key.type) {
        case HfValue::Integer:
        case HfValue::TokenId:
          config_json[key.hf] = value.as<int64_t>();
          break;
        case HfValue::Number:
          config_json[key.hf] = value.as<double>();
          break;
        case HfValue::Boolean:
          config_json[key.hf] = value.as<bool>();
          break;
        case HfValue::String:
          config_json[key.hf] = value.as<std::string>();
          break;
      }
    } catch (const YAML::Exception&) {
      throw ConfigError("model.model_config." + key.triax + ": '" + YAML::Dump(value) +
                        "' cannot be written to config.json key " + key.hf);
    }
  }
}

void require_hf_architecture(ConfigReader& config_json, const std::vector<std::string>& architectures) {
  const std::vector<std::string> found =
      config_json.get<std::vector<std::string>>("architectures", std::vector<std::string>{});
  for (const std::string& name : found)
    for (const std::string& ours : architectures)
      if (name == ours) return;
  auto list = [](const std::vector<std::string>& names) {
    std::string out;
    for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
    return "[" + out + "]";
  };
  config_json.fail("architectures", "expected one of " + list(architectures) + ", found " + list(found));
}

void require_hf_value(ConfigReader& config_json, const std::string& key, const std::string& expected,
                      const std::string& why) {
  const YAML::Node value = config_json.raw(key);
  if (!value.IsDefined() || value.IsNull()) return;
  const std::string found = value.IsScalar() ? value.Scalar() : YAML::Dump(value);
  if (!same_value(found, expected)) config_json.fail(key, "'" + found + "' is not supported: " + why);
}

namespace detail {

triax_status hf_config_from_hf(const HfMapping& mapping, const char* config_json, const triax_text_sink* out,
                               triax_error* error) {
  return guarded(error, [&] {
    Json parsed;
    try {
      parsed = Json::parse(config_json != nullptr ? config_json : "");
    } catch (const Json::exception& e) {
      throw ConfigError(std::string("config.json: not valid JSON: ") + e.what());
    }
    if (!parsed.is_object()) throw ConfigError("config.json: expected a JSON object");
    ConfigReader reader(yaml_of(parsed), "", "config.json");
    append(out, to_yaml_text(mapping.config_from_hf(reader)));
  });
}

triax_status hf_config_to_hf(const HfMapping& mapping, const char* model_config_yaml, const char* dtype,
                             const triax_text_sink* config_json, const triax_text_sink* generation_config_json,
                             triax_error* error) {
  return guarded(error, [&] {
    ConfigReader reader = ConfigReader::from_text(model_config_yaml, "model.model_config");
    const std::string config = mapping.config_to_hf(reader, dtype != nullptr ? dtype : "float32");
    // transformers' GenerationConfig.from_model_config: the token ids config.json names.
    const Json parsed = Json::parse(config);
    Json generation = Json::object();
    for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"})
      if (parsed.contains(key) && !parsed[key].is_null()) generation[key] = parsed[key];
    append(config_json, config);
    append(generation_config_json, generation.dump(2) + "\n");
  });
}

triax_status hf_tensor_map(const HfMapping& mapping, const char* model_config_yaml, const triax_hf_rule_sink* sink,
                           triax_error* error) {
  return guarded(error, [&] {
    if (sink == nullptr || sink->add == nullptr) throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "no rule sink given");
    ConfigReader reader = ConfigReader::from_text(model_config_yaml, "model.model_config");
    for (const HfTensorRule& rule : mapping.tensor_map(reader)) {
      std::vector<const char*> names;
      for (const std::string& name : rule.hf_names) names.push_back(name.c_str());
      triax_hf_tensor_rule c{};
      c.struct_size = sizeof(c);
      c.kind = rule.kind;
      c.triax_name = rule.kind == TRIAX_HF_IGNORE ? nullptr : rule.triax_name.c_str();
      c.ndim = static_cast<int32_t>(rule.shape.size());
      c.shape = rule.shape.data();
      c.dim = rule.dim;
      c.hf_count = static_cast<int32_t>(names.size());
      c.hf_names = names.data();
      c.hf_sizes = rule.hf_sizes.empty() ? nullptr : rule.hf_sizes.data();
      c.optional = rule.optional ? 1 : 0;
      triax_error sink_error{};
      const triax_status status = sink->add(sink->self, &c, &sink_error);
      if (status != TRIAX_OK) throw Error(status, sink_error.message);
    }
  });
}

}  // namespace detail
}  // namespace triax
