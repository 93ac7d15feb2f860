// Loads the training configuration: nanotron's YAML schema plus triax's additions.
//
// The document is read once, section by section, through ConfigReader (config_sections.hpp): an
// unknown key, a value of the wrong type or a missing required key stops the run with the file
// name, the key's full path and what was expected. Defaults, including the ones nanotron derives
// from other values (lr_decay_steps, lr_decay_starting_step, min_decay_lr, the run name, the run
// folder), are recorded into TrainConfig::resolved, the configuration exactly as the run uses it.
#include <numeric>

#include "config_sections.hpp"
#include "triax/config/train_config.hpp"
#include "triax/error.hpp"

namespace triax {
namespace {

std::string prefix(const std::string& origin) { return origin.empty() ? "" : origin + ": "; }

// Sections triax accepts for compatibility only when they are null.
void reject_unless_null(ConfigReader& root, const std::string& key, const std::string& feature) {
  YAML::Node value = root.raw(key);
  if (value.IsDefined() && !value.IsNull()) root.fail(key, "triax does not implement " + feature + "; set it to null");
}

// A CUDA graph replays the kernels of one process: the step it captures must not exchange tensors
// with other ranks mid-step (tp collectives, pipeline sends), whose peers and timing it cannot replay.
void check_cuda_graphs(const TrainConfig& c) {
  if (!c.general.cuda_graphs) return;
  if (c.parallelism.tp > 1 || c.parallelism.pp > 1)
    throw ConfigError(prefix(c.origin) + "general.cuda_graphs: needs parallelism.tp = 1 and parallelism.pp = 1 (here " +
                      std::to_string(c.parallelism.tp) + " and " + std::to_string(c.parallelism.pp) +
                      "): a captured step cannot hold tensor-parallel collectives or pipeline sends; data "
                      "parallelism (dp) is fine");
  if (c.parallelism.context_parallel_size > 1)
    throw ConfigError(prefix(c.origin) + "general.cuda_graphs: needs parallelism.context_parallel_size = 1 (here " +
                      std::to_string(c.parallelism.context_parallel_size) +
                      "): a captured step cannot hold the attention's collectives over the cp group");
  // ZeRO-3 gathers parameters over dp inside every block and repoints the modules at them.
  if (c.parallelism.pp_pass_record)
    throw ConfigError(prefix(c.origin) +
                      "general.cuda_graphs: not with parallelism.pp_pass_record (a replayed step runs no host code "
                      "that could time its passes)");
  if (c.optimizer.zero_stage == 3)
    throw ConfigError(prefix(c.origin) +
                      "general.cuda_graphs: not with optimizer.zero_stage 3 (each block all-gathers its parameters "
                      "over dp mid-step into new tensors, which a replayed graph would not see)");
}

// Each cp rank holds two of 2 x cp equal chunks of every sequence (context_parallel_slice.hpp).
void check_context_parallel(const TrainConfig& c) {
  const int64_t cp = c.parallelism.context_parallel_size;
  if (cp > 1 && c.tokens.sequence_length % (2 * cp) != 0)
    throw ConfigError(prefix(c.origin) + "parallelism.context_parallel_size: " + std::to_string(cp) +
                      " ranks cannot split tokens.sequence_length = " + std::to_string(c.tokens.sequence_length) +
                      " into 2 x " + std::to_string(cp) + " equal chunks (each rank holds chunks i and " +
                      std::to_string(2 * cp - 1) + " - i); use a sequence length that is a multiple of " +
                      std::to_string(2 * cp));
  const int64_t local = c.tokens.sequence_length / cp;
  if (cp > 1 && c.parallelism.tp_mode == "REDUCE_SCATTER" && local % c.parallelism.tp != 0)
    throw ConfigError(prefix(c.origin) + "parallelism.context_parallel_size: each of the " + std::to_string(cp) +
                      " ranks holds " + std::to_string(local) + " tokens of a sequence, which tp_mode REDUCE_SCATTER " +
                      "cannot split over parallelism.tp = " + std::to_string(c.parallelism.tp) +
                      " ranks; tokens.sequence_length must be a multiple of " +
                      std::to_string(2 * cp * c.parallelism.tp / std::gcd<int64_t>(2, c.parallelism.tp)));
}

}  // namespace

TrainConfig parse_train_config(const YAML::Node& document, const std::string& origin) {
  ConfigReader root(document, "", origin);
  TrainConfig c;
  c.origin = origin;
  c.general = config::read_general(root);
  c.checkpoints = config::read_checkpoints(root, c.general.run);
  c.parallelism = config::read_parallelism(root);
  c.model = config::read_model(root);
  c.tokenizer = config::read_tokenizer(root);
  c.tokens = config::read_tokens(root, c.parallelism);
  c.optimizer = config::read_optimizer(root, c.tokens);
  c.data_stages = config::read_data_stages(root, c.general, c.tokens);
  c.logging = config::read_logging(root);
  c.profiler = config::read_profiler(root);
  c.fp8_yaml = config::read_fp8(root);
  c.plugins = config::read_plugins(root);
  reject_unless_null(root, "metrics_logging", "nanotron's metrics_logging (triax writes its own metrics file)");
  reject_unless_null(root, "lighteval", "lighteval evaluation");
  reject_unless_null(root, "s3_upload", "uploading checkpoints to S3");
  root.finish();
  check_cuda_graphs(c);
  check_context_parallel(c);
  c.resolved = YAML::Clone(root.resolved());
  return c;
}

TrainConfig load_train_config(const std::string& file, const std::vector<std::string>& overrides) {
  YAML::Node document = load_yaml_file(file);
  if (!overrides.empty() && document.IsNull()) document.reset(YAML::Node(YAML::NodeType::Map));
  for (const auto& assignment : overrides) {
    if (!document.IsMap())
      throw ConfigError(prefix(file) + "--set " + assignment + ": the document is not a mapping of keys");
    try {
      apply_override(document, assignment);
    } catch (const ConfigError& e) {
      throw ConfigError(prefix(file) + e.what());
    }
  }
  return parse_train_config(document, file);
}

void validate_for_world(const TrainConfig& config, int world_size) {
  const ParallelismConfig& p = config.parallelism;
  if (world_size < 1)
    throw ConfigError(prefix(config.origin) + "the world size must be at least 1, got " + std::to_string(world_size));
  const int64_t ranks = p.dp * p.tp * p.pp * p.context_parallel_size;
  if (ranks != world_size)
    throw ConfigError(prefix(config.origin) + "parallelism.dp (" + std::to_string(p.dp) + ") x parallelism.tp (" +
                      std::to_string(p.tp) + ") x parallelism.pp (" + std::to_string(p.pp) + ")" +
                      (p.context_parallel_size > 1
                           ? " x parallelism.context_parallel_size (" + std::to_string(p.context_parallel_size) + ")"
                           : std::string()) +
                      " = " + std::to_string(ranks) + ", but the world size is " + std::to_string(world_size) +
                      "; dp*tp*pp" + (p.context_parallel_size > 1 ? "*cp" : "") +
                      " must equal the number of processes");
  if (p.dp % p.expert_parallel_size != 0)
    throw ConfigError(prefix(config.origin) + "parallelism.expert_parallel_size (" +
                      std::to_string(p.expert_parallel_size) + ") must divide parallelism.dp (" + std::to_string(p.dp) +
                      ")");
}

}  // namespace triax
