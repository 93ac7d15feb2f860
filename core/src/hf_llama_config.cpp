#include "triax/core/hf_llama_config.hpp"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "triax/config_reader.hpp"
#include "triax/core/log.hpp"
#include "triax/error.hpp"

namespace triax {
namespace {

using Json = nlohmann::json;

// Keys of a config.json that do not change what LlamaForCausalLM computes: skipped silently.
const std::set<std::string> kHarmlessKeys = {
    "transformers_version", "_name_or_path",          "_attn_implementation", "_attn_implementation_autoset",
    "output_attentions",    "output_hidden_states",   "return_dict",          "use_return_dict",
    "torchscript",          "transformers.js_config", "_commit_hash",         "tokenizer_class",
};

struct DtypeSpelling {
  const char* name;
  at::ScalarType dtype;
};
constexpr DtypeSpelling kFloatDtypes[] = {{"float32", at::kFloat}, {"bfloat16", at::kBFloat16}, {"float16", at::kHalf}};

// The shortest text that reads back to the same double ("1e-05", "500000.0").
std::string exact_text(double value) { return Json(value).dump(); }

// The same as a YAML scalar that YAML 1.1 readers (PyYAML, so nanotron) also take for a number:
// they need a dot before the exponent ("1.0e-05").
std::string yaml_number(double value) {
  std::string text = exact_text(value);
  const size_t exponent = text.find_first_of("eE");
  if (exponent != std::string::npos && text.find('.') == std::string::npos) text.insert(exponent, ".0");
  return text;
}

// Typed, strict access to the keys of one JSON object; errors name the file and the key path.
class JsonFields {
 public:
  JsonFields(const Json& object, std::string file, std::string prefix)
      : object_(object), file_(std::move(file)), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw Error(file_ + ": " + prefix_ + key + ": " + what);
  }

  // The value, or nullptr when absent or null; marks the key as read.
  const Json* find(const std::string& key) {
    read_.insert(key);
    auto it = object_.find(key);
    if (it == object_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  std::optional<int64_t> optional_integer(const std::string& key) {
    const Json* value = find(key);
    if (!value) return std::nullopt;
    if (!value->is_number_integer()) fail(key, "expected an integer, found " + value->dump());
    return value->get<int64_t>();
  }
  int64_t integer(const std::string& key, int64_t fallback) { return optional_integer(key).value_or(fallback); }
  int64_t required_integer(const std::string& key) {
    std::optional<int64_t> value = optional_integer(key);
    if (!value) fail(key, "required key is missing (expected an integer)");
    return *value;
  }
  int64_t positive_integer(const std::string& key, int64_t fallback) {
    const int64_t value = integer(key, fallback);
    if (value <= 0) fail(key, "must be positive, found " + std::to_string(value));
    return value;
  }

  std::optional<double> optional_number(const std::string& key) {
    const Json* value = find(key);
    if (!value) return std::nullopt;
    if (!value->is_number()) fail(key, "expected a number, found " + value->dump());
    return value->get<double>();
  }
  double number(const std::string& key, double fallback) { return optional_number(key).value_or(fallback); }
  double required_number(const std::string& key) {
    std::optional<double> value = optional_number(key);
    if (!value) fail(key, "required key is missing (expected a number)");
    return *value;
  }

  bool boolean(const std::string& key, bool fallback) {
    const Json* value = find(key);
    if (!value) return fallback;
    if (!value->is_boolean()) fail(key, "expected true or false, found " + value->dump());
    return value->get<bool>();
  }

  std::optional<std::string> optional_string(const std::string& key) {
    const Json* value = find(key);
    if (!value) return std::nullopt;
    if (!value->is_string()) fail(key, "expected a string, found " + value->dump());
    return value->get<std::string>();
  }

  // A token id: an integer, null, or (as some configs write eos_token_id) a list of one integer.
  std::optional<int64_t> token_id(const std::string& key, std::optional<int64_t> fallback) {
    if (object_.contains(key) && object_[key].is_null()) {
      read_.insert(key);
      return std::nullopt;
    }
    const Json* value = find(key);
    if (!value) return fallback;
    if (value->is_array()) {
      if (value->size() == 1 && (*value)[0].is_number_integer()) return (*value)[0].get<int64_t>();
      fail(key, "found " + value->dump() + ": triax's model_config holds a single " + key);
    }
    if (!value->is_number_integer()) fail(key, "expected a token id, found " + value->dump());
    return value->get<int64_t>();
  }

  std::vector<std::string> unread() const {
    std::vector<std::string> out;
    for (const auto& [key, value] : object_.items()) {
      (void)value;
      if (!read_.count(key)) out.push_back(key);
    }
    return out;
  }

 private:
  const Json& object_;
  std::string file_;
  std::string prefix_;
  std::set<std::string> read_;
};

// rope_scaling (transformers 4.x) or rope_parameters (5.x, which also holds rope_theta).
std::optional<HfLlamaConfig::RopeScaling> read_rope_scaling(const Json& object, const std::string& file,
                                                            const std::string& key, double* rope_theta) {
  JsonFields fields(object, file, key + ".");
  if (rope_theta) *rope_theta = fields.required_number("rope_theta");
  std::optional<std::string> rope_type = fields.optional_string("rope_type");
  std::optional<std::string> legacy_type = fields.optional_string("type");
  if (rope_type && legacy_type && *rope_type != *legacy_type)
    fields.fail("type", "\"" + *legacy_type + "\" disagrees with rope_type \"" + *rope_type + "\"");
  const std::string type = rope_type ? *rope_type : legacy_type ? *legacy_type : "default";
  const std::string type_key = rope_type ? "rope_type" : "type";

  std::optional<HfLlamaConfig::RopeScaling> out;
  if (type == "linear" || type == "llama3") {
    HfLlamaConfig::RopeScaling scaling;
    scaling.type = type;
    scaling.factor = fields.required_number("factor");
    if (type == "llama3") {
      scaling.low_freq_factor = fields.required_number("low_freq_factor");
      scaling.high_freq_factor = fields.required_number("high_freq_factor");
      scaling.original_max_position_embeddings = fields.required_integer("original_max_position_embeddings");
    }
    out = scaling;
  } else if (type != "default") {
    fields.fail(type_key,
                "\"" + type + "\" RoPE is not supported by triax's llama (supported: default, linear, llama3)");
  }
  std::vector<std::string> unread = fields.unread();
  if (!unread.empty())
    fields.fail(unread.front(), "not understood for rope_type \"" + type + "\": triax cannot represent it");
  return out;
}

std::optional<at::ScalarType> read_dtype(JsonFields& fields) {
  std::optional<at::ScalarType> found;
  std::string found_key;
  for (const char* key : {"torch_dtype", "dtype"}) {
    std::optional<std::string> name = fields.optional_string(key);
    if (!name) continue;
    std::optional<at::ScalarType> dtype;
    for (const DtypeSpelling& d : kFloatDtypes)
      if (*name == d.name) dtype = d.dtype;
    if (!dtype) fields.fail(key, "\"" + *name + "\" is not supported (expected float32, bfloat16 or float16)");
    if (found && *found != *dtype) fields.fail(key, "\"" + *name + "\" disagrees with " + found_key);
    found = dtype;
    found_key = key;
  }
  return found;
}

std::string dtype_spelling(at::ScalarType dtype) {
  for (const DtypeSpelling& d : kFloatDtypes)
    if (d.dtype == dtype) return d.name;
  throw Error(std::string("a Hugging Face Llama folder holds float32, bfloat16 or float16 weights, not ") +
              c10::toString(dtype));
}

Json token_json(const std::optional<int64_t>& id) { return id ? Json(*id) : Json(nullptr); }

}  // namespace

HfLlamaConfig HfLlamaConfig::from_config_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open (a Hugging Face model folder needs config.json)");
  Json root;
  try {
    root = Json::parse(in);
  } catch (const Json::exception& e) {
    throw Error(path + ": not valid JSON: " + e.what());
  }
  if (!root.is_object()) throw Error(path + ": expected a JSON object, found " + root.dump());
  JsonFields f(root, path, "");

  // Which model this is.
  const Json* architectures = f.find("architectures");
  if (!architectures || !architectures->is_array() ||
      std::find(architectures->begin(), architectures->end(), Json("LlamaForCausalLM")) == architectures->end())
    f.fail("architectures",
           "expected [\"LlamaForCausalLM\"], found " + (architectures ? architectures->dump() : "nothing"));
  if (architectures->size() != 1)
    f.fail("architectures", "expected [\"LlamaForCausalLM\"] alone, found " + architectures->dump());
  std::optional<std::string> model_type = f.optional_string("model_type");
  if (model_type != "llama")
    f.fail("model_type",
           "expected \"llama\", found " + (model_type ? "\"" + *model_type + "\"" : std::string("nothing")));

  HfLlamaConfig c;
  c.hidden_size = f.positive_integer("hidden_size", c.hidden_size);
  c.intermediate_size = f.positive_integer("intermediate_size", c.intermediate_size);
  c.num_hidden_layers = f.positive_integer("num_hidden_layers", c.num_hidden_layers);
  c.num_attention_heads = f.positive_integer("num_attention_heads", c.num_attention_heads);
  c.num_key_value_heads = f.positive_integer("num_key_value_heads", c.num_attention_heads);
  c.vocab_size = f.positive_integer("vocab_size", c.vocab_size);
  c.max_position_embeddings = f.positive_integer("max_position_embeddings", c.max_position_embeddings);
  c.rms_norm_eps = f.number("rms_norm_eps", c.rms_norm_eps);
  c.initializer_range = f.number("initializer_range", c.initializer_range);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", c.tie_word_embeddings);
  c.attention_bias = f.boolean("attention_bias", c.attention_bias);
  c.use_cache = f.boolean("use_cache", c.use_cache);
  c.pretraining_tp = f.positive_integer("pretraining_tp", c.pretraining_tp);
  c.bos_token_id = f.token_id("bos_token_id", c.bos_token_id);
  c.eos_token_id = f.token_id("eos_token_id", c.eos_token_id);
  c.pad_token_id = f.token_id("pad_token_id", std::nullopt);
  c.dtype = read_dtype(f);

  if (c.hidden_size % c.num_attention_heads != 0)
    f.fail("num_attention_heads", "hidden_size " + std::to_string(c.hidden_size) + " is not divisible by " +
                                      std::to_string(c.num_attention_heads) + " heads");
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    f.fail("num_key_value_heads", std::to_string(c.num_attention_heads) + " attention heads are not divisible by " +
                                      std::to_string(c.num_key_value_heads) + " key/value heads");
  if (std::optional<int64_t> head_dim = f.optional_integer("head_dim"); head_dim && *head_dim != c.head_dim())
    f.fail("head_dim", std::to_string(*head_dim) +
                           " is not supported: triax's llama needs head_dim = hidden_size / "
                           "num_attention_heads = " +
                           std::to_string(c.head_dim()));

  // Features triax's llama does not have.
  if (std::optional<std::string> act = f.optional_string("hidden_act"); act && *act != "silu")
    f.fail("hidden_act", "\"" + *act + "\" is not supported: triax's llama MLP uses silu");
  if (f.boolean("mlp_bias", false)) f.fail("mlp_bias", "true is not supported: triax's llama MLP has no biases");
  if (const double dropout = f.number("attention_dropout", 0.0); dropout != 0.0)
    f.fail("attention_dropout", exact_text(dropout) + " is not supported: triax's llama has no attention dropout");
  if (f.boolean("rope_interleaved", false))
    f.fail("rope_interleaved", "true (interleaved rotary pairs) is not supported: Llama rotates halves");
  if (!f.boolean("is_llama_config", true)) f.fail("is_llama_config", "false: this is not a Llama config");

  // RoPE: rope_theta + rope_scaling (4.x), or rope_parameters (5.x).
  const Json* rope_parameters = f.find("rope_parameters");
  const Json* rope_scaling = f.find("rope_scaling");
  std::optional<double> rope_theta = f.optional_number("rope_theta");
  if (rope_parameters) {
    if (!rope_parameters->is_object())
      f.fail("rope_parameters", "expected an object, found " + rope_parameters->dump());
    if (rope_scaling) f.fail("rope_scaling", "given together with rope_parameters: give one of them");
    double theta = 0.0;
    c.rope_scaling = read_rope_scaling(*rope_parameters, path, "rope_parameters", &theta);
    if (rope_theta && *rope_theta != theta)
      f.fail("rope_theta", exact_text(*rope_theta) + " disagrees with rope_parameters.rope_theta " + exact_text(theta));
    c.rope_theta = theta;
  } else {
    c.rope_theta = rope_theta.value_or(c.rope_theta);
    if (rope_scaling) {
      if (!rope_scaling->is_object())
        f.fail("rope_scaling", "expected an object or null, found " + rope_scaling->dump());
      c.rope_scaling = read_rope_scaling(*rope_scaling, path, "rope_scaling", nullptr);
    }
  }
  if (!(c.rope_theta > 0.0)) f.fail("rope_theta", "must be positive, found " + exact_text(c.rope_theta));
  if (!(c.rms_norm_eps > 0.0)) f.fail("rms_norm_eps", "must be positive, found " + exact_text(c.rms_norm_eps));

  std::string ignored;
  for (const std::string& key : f.unread())
    if (!kHarmlessKeys.count(key)) ignored += (ignored.empty() ? "" : ", ") + key;
  if (!ignored.empty()) log::warning(path + ": ignoring keys that LlamaForCausalLM does not use: " + ignored);
  return c;
}

std::string HfLlamaConfig::to_config_json(at::ScalarType dtype) const {
  Json rope = nullptr;
  if (rope_scaling) {
    rope = {{"rope_type", rope_scaling->type}, {"factor", rope_scaling->factor}};
    if (rope_scaling->type == "llama3") {
      rope["low_freq_factor"] = rope_scaling->low_freq_factor;
      rope["high_freq_factor"] = rope_scaling->high_freq_factor;
      rope["original_max_position_embeddings"] = rope_scaling->original_max_position_embeddings;
    }
  }
  const Json config = {
      {"architectures", Json::array({"LlamaForCausalLM"})},
      {"model_type", "llama"},
      {"attention_bias", attention_bias},
      {"attention_dropout", 0.0},
      {"bos_token_id", token_json(bos_token_id)},
      {"eos_token_id", token_json(eos_token_id)},
      {"pad_token_id", token_json(pad_token_id)},
      {"head_dim", head_dim()},
      {"hidden_act", "silu"},
      {"hidden_size", hidden_size},
      {"initializer_range", initializer_range},
      {"intermediate_size", intermediate_size},
      {"max_position_embeddings", max_position_embeddings},
      {"mlp_bias", false},
      {"num_attention_heads", num_attention_heads},
      {"num_hidden_layers", num_hidden_layers},
      {"num_key_value_heads", num_key_value_heads},
      {"pretraining_tp", pretraining_tp},
      {"rms_norm_eps", rms_norm_eps},
      {"rope_scaling", rope},
      {"rope_theta", rope_theta},
      {"tie_word_embeddings", tie_word_embeddings},
      {"torch_dtype", dtype_spelling(dtype)},
      {"use_cache", use_cache},
      {"vocab_size", vocab_size},
  };
  return config.dump(2) + "\n";
}

std::string HfLlamaConfig::to_generation_config_json() const {
  Json config = Json::object();
  if (bos_token_id) config["bos_token_id"] = *bos_token_id;
  if (eos_token_id) config["eos_token_id"] = *eos_token_id;
  if (pad_token_id) config["pad_token_id"] = *pad_token_id;
  return config.dump(2) + "\n";
}

HfLlamaConfig HfLlamaConfig::from_model_config(const YAML::Node& model_config) {
  // The keys and defaults of plugins/models/llama/llama_config.cpp (a test holds them equal).
  ConfigReader r(model_config, "model.model_config");
  HfLlamaConfig c;
  c.bos_token_id = r.get<int64_t>("bos_token_id", 1);
  c.eos_token_id = r.get<int64_t>("eos_token_id", 2);
  c.pad_token_id = r.optional<int64_t>("pad_token_id");
  r.choice("hidden_act", {"silu"}, std::string("silu"));
  c.hidden_size = r.get<int64_t>("hidden_size", c.hidden_size);
  c.initializer_range = r.get<double>("initializer_range", c.initializer_range);
  c.intermediate_size = r.get<int64_t>("intermediate_size", c.intermediate_size);
  if (!r.get<bool>("is_llama_config", true)) r.fail("is_llama_config", "must be true (or left out) for a Llama model");
  c.max_position_embeddings = r.get<int64_t>("max_position_embeddings", c.max_position_embeddings);
  c.num_attention_heads = r.get<int64_t>("num_attention_heads", c.num_attention_heads);
  c.num_hidden_layers = r.get<int64_t>("num_hidden_layers", c.num_hidden_layers);
  c.attention_bias = r.get<bool>("attention_bias", c.attention_bias);
  c.num_key_value_heads = r.optional<int64_t>("num_key_value_heads").value_or(c.num_attention_heads);
  c.pretraining_tp = r.get<int64_t>("pretraining_tp", c.pretraining_tp);
  c.rms_norm_eps = r.get<double>("rms_norm_eps", c.rms_norm_eps);
  if (std::optional<ConfigReader> s = r.optional_section("rope_scaling")) {
    std::optional<std::string> rope_type = s->optional<std::string>("rope_type");
    std::optional<std::string> legacy_type = s->optional<std::string>("type");
    if (rope_type && legacy_type && *rope_type != *legacy_type)
      s->fail("type", "'" + *legacy_type + "' disagrees with rope_type '" + *rope_type + "'");
    if (!rope_type && !legacy_type)
      s->fail("rope_type", "required key is missing (expected one of: default, linear, llama3)");
    const std::string type = rope_type ? *rope_type : *legacy_type;
    if (type == "linear" || type == "llama3") {
      RopeScaling scaling;
      scaling.type = type;
      scaling.factor = s->required<double>("factor");
      if (type == "llama3") {
        scaling.low_freq_factor = s->required<double>("low_freq_factor");
        scaling.high_freq_factor = s->required<double>("high_freq_factor");
        scaling.original_max_position_embeddings = s->required<int64_t>("original_max_position_embeddings");
      }
      c.rope_scaling = scaling;
    } else if (type != "default") {
      s->fail(rope_type ? "rope_type" : "type", "expected one of: default, linear, llama3; got '" + type + "'");
    }
    s->finish();
  }
  c.rope_theta = r.get<double>("rope_theta", c.rope_theta);
  if (r.get<bool>("rope_interleaved", false))
    r.fail("rope_interleaved", "true cannot be exported: Hugging Face Llama rotates halves (rope_interleaved: false)");
  c.tie_word_embeddings = r.get<bool>("tie_word_embeddings", c.tie_word_embeddings);
  c.use_cache = r.get<bool>("use_cache", c.use_cache);
  c.vocab_size = r.get<int64_t>("vocab_size", c.vocab_size);
  // How the plugin computes attention, and a training loss term: neither is part of the weights.
  r.ignore("_attn_implementation");
  r.ignore("z_loss_enabled");
  r.ignore("z_loss_coefficient");
  r.finish();

  auto positive = [&](const char* key, int64_t value) {
    if (value <= 0) r.fail(key, "must be positive, got " + std::to_string(value));
  };
  positive("hidden_size", c.hidden_size);
  positive("intermediate_size", c.intermediate_size);
  positive("num_hidden_layers", c.num_hidden_layers);
  positive("num_attention_heads", c.num_attention_heads);
  positive("num_key_value_heads", c.num_key_value_heads);
  positive("vocab_size", c.vocab_size);
  if (c.hidden_size % c.num_attention_heads != 0)
    r.fail("num_attention_heads", "hidden_size is not divisible by num_attention_heads");
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    r.fail("num_key_value_heads", "num_attention_heads is not divisible by num_key_value_heads");
  return c;
}

YAML::Node HfLlamaConfig::to_model_config() const {
  YAML::Node m(YAML::NodeType::Map);
  if (bos_token_id) m["bos_token_id"] = *bos_token_id;
  if (eos_token_id) m["eos_token_id"] = *eos_token_id;
  m["hidden_act"] = "silu";
  m["hidden_size"] = hidden_size;
  m["initializer_range"] = yaml_number(initializer_range);
  m["intermediate_size"] = intermediate_size;
  m["is_llama_config"] = true;
  m["max_position_embeddings"] = max_position_embeddings;
  m["num_attention_heads"] = num_attention_heads;
  m["num_hidden_layers"] = num_hidden_layers;
  m["num_key_value_heads"] = num_key_value_heads;
  m["pad_token_id"] = pad_token_id ? YAML::Node(*pad_token_id) : YAML::Node(YAML::NodeType::Null);
  m["pretraining_tp"] = pretraining_tp;
  m["rms_norm_eps"] = yaml_number(rms_norm_eps);
  m["rope_interleaved"] = false;
  if (rope_scaling) {
    YAML::Node s(YAML::NodeType::Map);
    s["rope_type"] = rope_scaling->type;
    s["factor"] = yaml_number(rope_scaling->factor);
    if (rope_scaling->type == "llama3") {
      s["low_freq_factor"] = yaml_number(rope_scaling->low_freq_factor);
      s["high_freq_factor"] = yaml_number(rope_scaling->high_freq_factor);
      s["original_max_position_embeddings"] = rope_scaling->original_max_position_embeddings;
    }
    m["rope_scaling"] = s;
  } else {
    m["rope_scaling"] = YAML::Node(YAML::NodeType::Null);
  }
  m["rope_theta"] = yaml_number(rope_theta);
  m["tie_word_embeddings"] = tie_word_embeddings;
  m["use_cache"] = use_cache;
  m["vocab_size"] = vocab_size;
  m["attention_bias"] = attention_bias;
  return m;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> HfLlamaConfig::tensor_shapes() const {
  const int64_t h = hidden_size;
  const int64_t q = num_attention_heads * head_dim();
  const int64_t kv = num_key_value_heads * head_dim();
  const int64_t ffn = intermediate_size;
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  out.push_back({"model.embed_tokens.weight", {vocab_size, h}});
  for (int64_t i = 0; i < num_hidden_layers; ++i) {
    const std::string layer = "model.layers." + std::to_string(i) + ".";
    out.push_back({layer + "input_layernorm.weight", {h}});
    out.push_back({layer + "self_attn.q_proj.weight", {q, h}});
    out.push_back({layer + "self_attn.k_proj.weight", {kv, h}});
    out.push_back({layer + "self_attn.v_proj.weight", {kv, h}});
    out.push_back({layer + "self_attn.o_proj.weight", {h, q}});
    if (attention_bias) {
      out.push_back({layer + "self_attn.q_proj.bias", {q}});
      out.push_back({layer + "self_attn.k_proj.bias", {kv}});
      out.push_back({layer + "self_attn.v_proj.bias", {kv}});
      out.push_back({layer + "self_attn.o_proj.bias", {h}});
    }
    out.push_back({layer + "post_attention_layernorm.weight", {h}});
    out.push_back({layer + "mlp.gate_proj.weight", {ffn, h}});
    out.push_back({layer + "mlp.up_proj.weight", {ffn, h}});
    out.push_back({layer + "mlp.down_proj.weight", {h, ffn}});
  }
  out.push_back({"model.norm.weight", {h}});
  if (!tie_word_embeddings) out.push_back({"lm_head.weight", {vocab_size, h}});
  return out;
}

}  // namespace triax
