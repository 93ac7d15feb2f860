#include "triax/core/checkpoint/checkpoint_metadata.hpp"

#include "triax/config_reader.hpp"
#include "triax/core/checkpoint/checkpoint_error.hpp"

namespace triax::checkpoint {
namespace {

YAML::Node lr_to_yaml(const LrSchedulerConfig& lr) {
  YAML::Node node;
  node["learning_rate"] = lr.learning_rate;
  node["lr_warmup_steps"] = lr.lr_warmup_steps;
  node["lr_warmup_style"] = lr.lr_warmup_style;
  node["lr_decay_style"] = lr.lr_decay_style;
  node["lr_decay_steps"] = lr.lr_decay_steps;
  node["lr_decay_starting_step"] = lr.lr_decay_starting_step;
  node["min_decay_lr"] = lr.min_decay_lr;
  return node;
}

LrSchedulerConfig lr_from_yaml(ConfigReader reader) {
  LrSchedulerConfig lr;
  lr.learning_rate = reader.required<double>("learning_rate");
  lr.lr_warmup_steps = reader.required<int64_t>("lr_warmup_steps");
  lr.lr_warmup_style = reader.required<std::string>("lr_warmup_style");
  lr.lr_decay_style = reader.required<std::string>("lr_decay_style");
  lr.lr_decay_steps = reader.required<int64_t>("lr_decay_steps");
  lr.lr_decay_starting_step = reader.required<int64_t>("lr_decay_starting_step");
  lr.min_decay_lr = reader.required<double>("min_decay_lr");
  reader.finish();
  return lr;
}

YAML::Node data_to_yaml(const data::DataLoaderState& state) {
  YAML::Node node;
  node["completed_steps"] = state.completed_steps;
  node["consumed_samples"] = state.consumed_samples;
  node["stages"] = YAML::Node(YAML::NodeType::Sequence);
  for (const auto& stage : state.stages) {
    YAML::Node s;
    s["name"] = stage.name;
    s["consumed_samples"] = stage.consumed_samples;
    s["datasets"] = YAML::Node(YAML::NodeType::Sequence);
    for (const auto& dataset : stage.datasets) {
      YAML::Node d;
      d["folder"] = dataset.folder;
      d["samples_per_epoch"] = dataset.samples_per_epoch;
      d["consumed_samples"] = dataset.consumed_samples;
      d["consumed_tokens"] = dataset.consumed_tokens;
      d["epoch"] = dataset.epoch;
      s["datasets"].push_back(d);
    }
    node["stages"].push_back(s);
  }
  return node;
}

data::DataLoaderState data_from_yaml(ConfigReader reader) {
  data::DataLoaderState state;
  state.completed_steps = reader.required<int64_t>("completed_steps");
  state.consumed_samples = reader.required<int64_t>("consumed_samples");
  for (ConfigReader stage_reader : reader.section_list("stages")) {
    data::StagePosition stage;
    stage.name = stage_reader.required<std::string>("name");
    stage.consumed_samples = stage_reader.required<int64_t>("consumed_samples");
    if (stage_reader.contains("datasets"))
      for (ConfigReader d : stage_reader.section_list("datasets")) {
        data::DatasetPosition dataset;
        dataset.folder = d.required<std::string>("folder");
        dataset.samples_per_epoch = d.required<int64_t>("samples_per_epoch");
        dataset.consumed_samples = d.required<int64_t>("consumed_samples");
        dataset.consumed_tokens = d.required<int64_t>("consumed_tokens");
        dataset.epoch = d.required<int64_t>("epoch");
        d.finish();
        stage.datasets.push_back(dataset);
      }
    else
      stage_reader.ignore("datasets");
    stage_reader.finish();
    state.stages.push_back(stage);
  }
  reader.finish();
  return state;
}

}  // namespace

std::string Topology::describe() const {
  return "dp=" + std::to_string(dp) + " tp=" + std::to_string(tp) + " pp=" + std::to_string(pp) +
         " zero_stage=" + std::to_string(zero_stage) + (cp > 1 ? " cp=" + std::to_string(cp) : "");
}

YAML::Node CheckpointMetadata::to_yaml() const {
  YAML::Node node;
  node["format"] = "triax-checkpoint";
  node["format_version"] = format_version;
  node["step"] = step;
  node["consumed_tokens"] = consumed_tokens;
  node["topology"]["dp"] = topology.dp;
  node["topology"]["tp"] = topology.tp;
  node["topology"]["pp"] = topology.pp;
  node["topology"]["zero_stage"] = topology.zero_stage;
  if (topology.cp > 1) node["topology"]["cp"] = topology.cp;
  node["model"]["plugin"] = model_plugin;
  node["model"]["dtype"] = model_dtype;
  node["optimizer"]["plugin"] = optimizer_plugin;
  node["optimizer"]["has_state"] = has_optimizer_state;
  node["versions"]["triax"] = triax_version;
  node["versions"]["libtorch"] = torch_version;
  node["saved_at"] = saved_at;
  node["lr_scheduler"] = lr_to_yaml(lr_scheduler);
  node["data"] = data_to_yaml(data);
  node["files"] = YAML::Node(YAML::NodeType::Sequence);
  for (const auto& file : files) node["files"].push_back(file);
  return node;
}

CheckpointMetadata CheckpointMetadata::from_yaml(const YAML::Node& node, const std::string& file) {
  try {
    ConfigReader reader(node, "", file);
    if (reader.required<std::string>("format") != "triax-checkpoint")
      reader.fail("format", "expected 'triax-checkpoint'");
    CheckpointMetadata m;
    m.format_version = reader.required<int64_t>("format_version");
    if (m.format_version != kFormatVersion)
      reader.fail("format_version", "this triax reads format version " + std::to_string(kFormatVersion) + ", not " +
                                        std::to_string(m.format_version));
    m.step = reader.required<int64_t>("step");
    m.consumed_tokens = reader.required<int64_t>("consumed_tokens");
    ConfigReader topology = reader.section("topology");
    m.topology.dp = topology.required<int64_t>("dp");
    m.topology.tp = topology.required<int64_t>("tp");
    m.topology.pp = topology.required<int64_t>("pp");
    m.topology.zero_stage = topology.required<int64_t>("zero_stage");
    m.topology.cp = topology.get<int64_t>("cp", 1);
    topology.finish();
    ConfigReader model = reader.section("model");
    m.model_plugin = model.required<std::string>("plugin");
    m.model_dtype = model.required<std::string>("dtype");
    model.finish();
    ConfigReader optimizer = reader.section("optimizer");
    m.optimizer_plugin = optimizer.required<std::string>("plugin");
    m.has_optimizer_state = optimizer.required<bool>("has_state");
    optimizer.finish();
    ConfigReader versions = reader.section("versions");
    m.triax_version = versions.required<std::string>("triax");
    m.torch_version = versions.required<std::string>("libtorch");
    versions.finish();
    m.saved_at = reader.required<std::string>("saved_at");
    m.lr_scheduler = lr_from_yaml(reader.section("lr_scheduler"));
    m.data = data_from_yaml(reader.section("data"));
    m.files = reader.required<std::vector<std::string>>("files");
    if (static_cast<int64_t>(m.files.size()) != m.topology.world_size())
      reader.fail("files", "lists " + std::to_string(m.files.size()) + " files for a world of " +
                               std::to_string(m.topology.world_size()) + " ranks");
    reader.finish();
    return m;
  } catch (const ConfigError& e) {
    throw CheckpointError(std::string("checkpoint metadata: ") + e.what());
  }
}

CheckpointMetadata CheckpointMetadata::read(const std::string& file) {
  YAML::Node node;
  try {
    node = YAML::LoadFile(file);
  } catch (const YAML::BadFile&) {
    throw CheckpointError("checkpoint metadata " + file + " is missing or unreadable");
  } catch (const YAML::Exception& e) {
    throw CheckpointError("checkpoint metadata " + file + " is not valid YAML: " + e.what());
  }
  return from_yaml(node, file);
}

}  // namespace triax::checkpoint
