// model: which model plugin, its hyper-parameters (model_config, read by the plugin), how the
// weights start (init_method), the parameter dtype and the gradient bucket size.
#include "config_sections.hpp"

namespace triax::config {
namespace {

constexpr const char* kModelConfigWhat = "the model's hyper-parameters, read by the model plugin";
constexpr const char* kInitMethodWhat = "for example {std: 0.02} or {path: <checkpoint or Hugging Face folder>}";

// Whether init_method names weights to start from (a Hugging Face folder or a checkpoint).
bool starts_from_weights(const YAML::Node& init_method) {
  const YAML::Node& constant = init_method;
  return constant["path"].IsDefined() && !constant["path"].IsNull();
}

}  // namespace

ModelSection read_model(ConfigReader& root) {
  ConfigReader r = root.section("model");
  ModelSection m;
  // Absent: empty, and the plugin is chosen from the marker key of model_config.
  std::optional<std::string> plugin = r.optional<std::string>("plugin");
  if (plugin && plugin->empty()) r.fail("plugin", "must not be empty (leave it out to choose by model_config)");
  m.plugin = plugin.value_or("");
  std::optional<YAML::Node> model_config = optional_mapping(r, "model_config", kModelConfigWhat);
  std::optional<YAML::Node> init_method = optional_mapping(r, "init_method", kInitMethodWhat);

  // nanotron's names (str_to_dtype); "torch.bfloat16" is accepted too and written as "bfloat16".
  std::optional<std::string> dtype = r.optional<std::string>("dtype");
  if (dtype) {
    std::string name = dtype->rfind("torch.", 0) == 0 ? dtype->substr(6) : *dtype;
    if (name != "float32" && name != "bfloat16" && name != "float16" && name != "float64")
      r.fail("dtype", "expected one of: float32, bfloat16, float16, float64; got '" + *dtype + "'");
    m.dtype = name;
  }
  r.resolved()["dtype"] = m.dtype;

  // Bounded so that the padded vocabulary and the bucket size in bytes (MiB << 20) stay in range.
  m.make_vocab_size_divisible_by =
      int_or(r, "make_vocab_size_divisible_by", m.make_vocab_size_divisible_by, 1, int64_t{1} << 20);
  m.ddp_bucket_cap_mb = int_or(r, "ddp_bucket_cap_mb", m.ddp_bucket_cap_mb, 1, int64_t{1} << 20);
  r.finish();  // before the missing keys: a misspelt one is reported as unknown, not as missing

  // model_config may be left out when init_method.path names a Hugging Face folder: its
  // config.json then gives the hyper-parameters.
  if (!model_config && !(init_method && starts_from_weights(*init_method)))
    r.fail("model_config", std::string("required key is missing (expected a mapping: ") + kModelConfigWhat +
                               "; or init_method.path naming a Hugging Face folder to take it from)");
  if (!init_method)
    r.fail("init_method", std::string("required key is missing (expected a mapping: ") + kInitMethodWhat + ")");
  // path is the host's (the plugin ignores it): its type is checked here.
  const YAML::Node& path = static_cast<const YAML::Node&>(*init_method)["path"];
  if (path.IsDefined() && !path.IsNull() && (!path.IsScalar() || path.Scalar().empty()))
    ConfigReader(*init_method, r.key_path("init_method"), r.origin())
        .fail("path", "expected a folder (a checkpoint or a Hugging Face folder) as a non-empty string");
  m.model_config = model_config ? *model_config : YAML::Node(YAML::NodeType::Null);
  m.init_method = *init_method;
  return m;
}

}  // namespace triax::config
