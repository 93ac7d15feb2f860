// Loads the training configuration: nanotron's YAML schema plus triax's additions.
//
// Every section is read through a ConfigReader, so an unknown key, a value of the wrong type or a
// missing required key stops the run with the file name, the key's full path and what was
// expected. Before a section is read, its keys are checked against the section's known keys: a
// misspelt key is reported as unknown (with the known keys listed) rather than as a missing
// required key. Defaults, including the ones nanotron derives from other values (lr_decay_steps,
// lr_decay_starting_step, min_decay_lr, the run name, the run folder), are recorded into
// TrainConfig::resolved, which is the configuration exactly as the run uses it.
#include "triax/core/config.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <ctime>
#include <map>
#include <regex>
#include <sstream>

#include "triax/config_reader.hpp"
#include "triax/error.hpp"

namespace triax {
namespace {

using Keys = std::vector<std::string>;

// ---- key lists: one place that names every key a section accepts ---------------------------

const Keys kRootKeys = {"general",  "checkpoints", "parallelism", "model",   "tokenizer",
                        "tokens",   "optimizer",   "data_stages", "logging", "metrics_logging",
                        "profiler", "lighteval",   "s3_upload",   "plugins"};
const Keys kGeneralKeys = {
    "project", "run", "seed", "step", "consumed_train_samples", "benchmark_csv_path", "ignore_sanity_checks", "device"};
const Keys kCheckpointsKeys = {
    "checkpoints_path",       "checkpoint_interval", "save_initial_state", "save_final_state",
    "resume_checkpoint_path", "load_lr_scheduler",   "load_optimizer",     "checkpoints_path_is_shared_file_system",
    "keep_last"};
const Keys kParallelismKeys = {"dp",
                               "pp",
                               "tp",
                               "expert_parallel_size",
                               "context_parallel_size",
                               "pp_engine",
                               "tp_mode",
                               "tp_linear_async_communication",
                               "recompute_layer",
                               "moe_layer_recompute",
                               "tp_recompute_allgather",
                               "comm_backend",
                               "comm_timeout_seconds",
                               "pp_blocks_per_stage",
                               "pp_chunks_per_rank"};
const Keys kModelKeys = {"plugin",           "model_config", "init_method", "dtype", "make_vocab_size_divisible_by",
                         "ddp_bucket_cap_mb"};
const Keys kTokenizerKeys = {"tokenizer_name_or_path", "tokenizer_revision", "tokenizer_max_length"};
const Keys kTokensKeys = {
    "sequence_length",    "train_steps",       "micro_batch_size",  "batch_accumulation_per_replica",
    "val_check_interval", "limit_val_batches", "limit_test_batches"};
const Keys kOptimizerKeys = {"optimizer_factory",
                             "zero_stage",
                             "weight_decay",
                             "weight_decay_exclude_named_params",
                             "clip_grad",
                             "accumulate_grad_in_fp32",
                             "learning_rate_scheduler"};
const Keys kLrSchedulerKeys = {"learning_rate",  "lr_warmup_steps",        "lr_warmup_style", "lr_decay_style",
                               "lr_decay_steps", "lr_decay_starting_step", "min_decay_lr"};
const Keys kDataStageKeys = {"name", "start_training_step", "data", "sequence_length"};
const Keys kDataKeys = {"dataset", "seed", "num_loading_workers"};
const Keys kLoggingKeys = {"log_level", "log_level_replica", "iteration_step_info_interval", "peak_tflops"};
const Keys kPluginsKeys = {"paths"};

// ZeRO stages with an optimizer plugin ("zero<k>_<name>"); widen when a plugin shards more.
constexpr int64_t kMaxZeroStage = 1;

// ---- small helpers --------------------------------------------------------------------------

std::string prefix(const std::string& origin) { return origin.empty() ? "" : origin + ": "; }

std::string line_of(const YAML::Node& node) {
  if (!node.IsDefined() || node.Mark().line < 0) return "";
  return " (line " + std::to_string(node.Mark().line + 1) + ")";
}

std::string number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string uppercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// The value under `key` of a raw mapping, never inserting; an absent key or a node that is not a
// mapping gives an undefined node (yaml-cpp's "zombie" nodes throw on most calls, so never return one).
YAML::Node child(const YAML::Node& node, const std::string& key) {
  if (!node.IsDefined() || !node.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  const YAML::Node& constant = node;
  YAML::Node value = constant[key];
  return value.IsDefined() ? value : YAML::Node(YAML::NodeType::Undefined);
}

// Reports any key of `node` that is not in `keys`, before the section is read: a misspelt
// required key then shows up as unknown rather than as missing.
void check_keys(const YAML::Node& node, const std::string& path, const std::string& origin, const Keys& keys) {
  if (!node.IsDefined() || !node.IsMap()) return;  // the section reader reports the type
  ConfigReader probe(node, path, origin);
  for (const auto& key : keys) probe.ignore(key);
  probe.finish();
}

// A section that may be absent: absent or null reads as an empty mapping, so that every key gets
// its default and the defaults are recorded under the section's name in resolved().
ConfigReader section_or_empty(ConfigReader& parent, const std::string& key) {
  std::optional<ConfigReader> present = parent.optional_section(key);
  if (present) return *present;
  ConfigReader empty(YAML::Node(YAML::NodeType::Map), parent.key_path(key), parent.origin());
  parent.resolved()[key] = empty.resolved();
  return empty;
}

int64_t int_at_least(ConfigReader& r, const std::string& key, int64_t value, int64_t min) {
  if (value < min) r.fail(key, "must be at least " + std::to_string(min) + ", got " + std::to_string(value));
  return value;
}

int64_t required_int(ConfigReader& r, const std::string& key, int64_t min) {
  return int_at_least(r, key, r.required<int64_t>(key), min);
}

int64_t int_or(ConfigReader& r, const std::string& key, int64_t fallback, int64_t min) {
  return int_at_least(r, key, r.get<int64_t>(key, fallback), min);
}

std::optional<int64_t> optional_int(ConfigReader& r, const std::string& key, int64_t min) {
  std::optional<int64_t> value = r.optional<int64_t>(key);
  if (value) int_at_least(r, key, *value, min);
  return value;
}

std::string nonempty_string_or(ConfigReader& r, const std::string& key, const std::string& fallback) {
  std::string value = r.get<std::string>(key, fallback);
  if (value.empty()) r.fail(key, "must not be empty");
  return value;
}

// Sections triax accepts for compatibility only when they are null.
void reject_unless_null(ConfigReader& root, const std::string& key, const std::string& feature) {
  YAML::Node value = root.raw(key);
  if (value.IsDefined() && !value.IsNull()) root.fail(key, "triax does not implement " + feature + "; set it to null");
}

// %date -> YYYYmmdd_HHMMSS (local time; TRIAX_RUN_DATE, when set, is used instead so that every
// rank of a job names the same run), %jobid -> SLURM_JOB_ID or "local". As nanotron does.
std::string expand_run_name(std::string run) {
  auto replace_all = [&run](const std::string& what, const std::string& with) {
    for (size_t at = run.find(what); at != std::string::npos; at = run.find(what, at + with.size()))
      run.replace(at, what.size(), with);
  };
  if (run.find("%date") != std::string::npos) {
    std::string date;
    if (const char* fixed = std::getenv("TRIAX_RUN_DATE"); fixed && *fixed) {
      date = fixed;
    } else {
      std::time_t now = std::time(nullptr);
      std::tm local{};
      localtime_r(&now, &local);
      char text[32];
      std::strftime(text, sizeof(text), "%Y%m%d_%H%M%S", &local);
      date = text;
    }
    replace_all("%date", date);
  }
  if (run.find("%jobid") != std::string::npos) {
    const char* job = std::getenv("SLURM_JOB_ID");
    replace_all("%jobid", job && *job ? job : "local");
  }
  return run;
}

// ---- sections -------------------------------------------------------------------------------

GeneralConfig parse_general(ConfigReader& root, const YAML::Node& raw) {
  check_keys(child(raw, "general"), "general", root.origin(), kGeneralKeys);
  ConfigReader r = section_or_empty(root, "general");
  GeneralConfig g;
  g.project = nonempty_string_or(r, "project", g.project);
  std::string run = nonempty_string_or(r, "run", g.run);
  g.run = expand_run_name(run);
  r.resolved()["run"] = g.run;
  g.seed = int_or(r, "seed", g.seed, 0);
  g.step = optional_int(r, "step", 0);
  g.consumed_train_samples = optional_int(r, "consumed_train_samples", 0);
  g.benchmark_csv_path = r.optional<std::string>("benchmark_csv_path");
  g.ignore_sanity_checks = r.get<bool>("ignore_sanity_checks", g.ignore_sanity_checks);
  g.device = r.choice("device", {"auto", "cpu", "cuda"}, g.device);
  r.finish();
  return g;
}

CheckpointsConfig parse_checkpoints(ConfigReader& root, const YAML::Node& raw, const std::string& run) {
  check_keys(child(raw, "checkpoints"), "checkpoints", root.origin(), kCheckpointsKeys);
  const bool present = root.contains("checkpoints");
  ConfigReader r = section_or_empty(root, "checkpoints");
  CheckpointsConfig c;
  if (present) {
    c.checkpoints_path = r.required<std::string>("checkpoints_path");
    if (c.checkpoints_path.empty()) r.fail("checkpoints_path", "must not be empty");
  } else {
    c.checkpoints_path = r.get<std::string>("checkpoints_path", "runs/" + run);
  }
  c.checkpoint_interval = int_or(r, "checkpoint_interval", c.checkpoint_interval, 0);
  c.save_initial_state = r.get<bool>("save_initial_state", c.save_initial_state);
  c.save_final_state = r.get<bool>("save_final_state", c.save_final_state);
  c.resume_checkpoint_path = r.optional<std::string>("resume_checkpoint_path");
  c.load_lr_scheduler = r.get<bool>("load_lr_scheduler", c.load_lr_scheduler);
  c.load_optimizer = r.get<bool>("load_optimizer", c.load_optimizer);
  c.checkpoints_path_is_shared_file_system =
      r.get<bool>("checkpoints_path_is_shared_file_system", c.checkpoints_path_is_shared_file_system);
  c.keep_last = int_or(r, "keep_last", c.keep_last, 0);
  r.finish();
  return c;
}

ParallelismConfig parse_parallelism(ConfigReader& root, const YAML::Node& raw) {
  check_keys(child(raw, "parallelism"), "parallelism", root.origin(), kParallelismKeys);
  ConfigReader r = section_or_empty(root, "parallelism");
  ParallelismConfig p;
  p.dp = int_or(r, "dp", p.dp, 1);
  p.pp = int_or(r, "pp", p.pp, 1);
  p.tp = int_or(r, "tp", p.tp, 1);
  p.expert_parallel_size = int_or(r, "expert_parallel_size", p.expert_parallel_size, 1);
  if (r.get<int64_t>("context_parallel_size", 1) != 1)
    r.fail("context_parallel_size", "triax does not implement context parallelism; set it to 1");
  p.pp_engine = nonempty_string_or(r, "pp_engine", p.pp_engine);

  // nanotron reads tp_mode case-insensitively (TensorParallelLinearMode[x.upper()]).
  std::optional<std::string> mode = r.optional<std::string>("tp_mode");
  p.tp_mode = mode ? uppercase(*mode) : p.tp_mode;
  if (p.tp_mode != "ALL_REDUCE" && p.tp_mode != "REDUCE_SCATTER")
    r.fail("tp_mode", "expected one of: ALL_REDUCE, REDUCE_SCATTER; got '" + *mode + "'");
  r.resolved()["tp_mode"] = p.tp_mode;

  p.tp_linear_async_communication = r.get<bool>("tp_linear_async_communication", p.tp_linear_async_communication);
  p.recompute_layer = r.get<bool>("recompute_layer", p.recompute_layer);
  p.moe_layer_recompute = r.get<bool>("moe_layer_recompute", p.moe_layer_recompute);
  p.tp_recompute_allgather = r.get<bool>("tp_recompute_allgather", p.tp_recompute_allgather);
  p.comm_backend = r.choice("comm_backend", {"auto", "mpi", "nccl"}, p.comm_backend);
  p.comm_timeout_seconds = r.get<double>("comm_timeout_seconds", p.comm_timeout_seconds);
  p.pp_chunks_per_rank = int_or(r, "pp_chunks_per_rank", p.pp_chunks_per_rank, 1);
  p.pp_blocks_per_stage = r.optional<std::vector<int64_t>>("pp_blocks_per_stage");
  const int64_t virtual_stages = p.pp * p.pp_chunks_per_rank;
  if (p.pp_blocks_per_stage && static_cast<int64_t>(p.pp_blocks_per_stage->size()) != virtual_stages)
    r.fail("pp_blocks_per_stage",
           "expected " + std::to_string(virtual_stages) + " block counts (one per " +
               (p.pp_chunks_per_rank == 1 ? std::string("pipeline rank") : "virtual stage: pp x pp_chunks_per_rank") +
               "), got " + std::to_string(p.pp_blocks_per_stage->size()));
  if (!(p.comm_timeout_seconds > 0)) r.fail("comm_timeout_seconds", "must be > 0 (seconds)");
  r.finish();
  p.section = YAML::Clone(r.resolved());
  return p;
}

// A mapping handed to a plugin as is; required.
YAML::Node required_mapping(ConfigReader& r, const std::string& key, const std::string& what) {
  YAML::Node value = r.raw(key);
  if (!value.IsDefined() || value.IsNull()) r.fail(key, "required key is missing (expected a mapping: " + what + ")");
  if (!value.IsMap()) r.fail(key, "expected a mapping (" + what + ")");
  return YAML::Clone(value);
}

ModelSection parse_model(ConfigReader& root, const YAML::Node& raw) {
  check_keys(child(raw, "model"), "model", root.origin(), kModelKeys);
  ConfigReader r = root.section("model");
  ModelSection m;
  m.plugin = nonempty_string_or(r, "plugin", m.plugin);
  m.model_config = required_mapping(r, "model_config", "the model's hyper-parameters, read by the model plugin");
  m.init_method = required_mapping(r, "init_method", "for example {std: 0.02} or {path: <checkpoint>}");

  // nanotron's names (str_to_dtype); "torch.bfloat16" is accepted too and written as "bfloat16".
  std::optional<std::string> dtype = r.optional<std::string>("dtype");
  if (dtype) {
    std::string name = dtype->rfind("torch.", 0) == 0 ? dtype->substr(6) : *dtype;
    if (name != "float32" && name != "bfloat16" && name != "float16" && name != "float64")
      r.fail("dtype", "expected one of: float32, bfloat16, float16, float64; got '" + *dtype + "'");
    m.dtype = name;
  }
  r.resolved()["dtype"] = m.dtype;

  m.make_vocab_size_divisible_by = int_or(r, "make_vocab_size_divisible_by", m.make_vocab_size_divisible_by, 1);
  m.ddp_bucket_cap_mb = int_or(r, "ddp_bucket_cap_mb", m.ddp_bucket_cap_mb, 1);
  r.finish();
  return m;
}

TokenizerConfig parse_tokenizer(ConfigReader& root, const YAML::Node& raw) {
  check_keys(child(raw, "tokenizer"), "tokenizer", root.origin(), kTokenizerKeys);
  ConfigReader r = section_or_empty(root, "tokenizer");
  TokenizerConfig t;
  t.tokenizer_name_or_path = r.optional<std::string>("tokenizer_name_or_path");
  t.tokenizer_revision = r.optional<std::string>("tokenizer_revision");
  t.tokenizer_max_length = optional_int(r, "tokenizer_max_length", 1);
  r.finish();
  return t;
}

TokensConfig parse_tokens(ConfigReader& root, const YAML::Node& raw) {
  check_keys(child(raw, "tokens"), "tokens", root.origin(), kTokensKeys);
  ConfigReader r = root.section("tokens");
  TokensConfig t;
  t.sequence_length = required_int(r, "sequence_length", 1);
  t.train_steps = required_int(r, "train_steps", 1);
  t.micro_batch_size = required_int(r, "micro_batch_size", 1);
  t.batch_accumulation_per_replica = required_int(r, "batch_accumulation_per_replica", 1);
  t.val_check_interval = int_or(r, "val_check_interval", t.val_check_interval, -1);
  t.limit_val_batches = int_or(r, "limit_val_batches", t.limit_val_batches, 0);
  t.limit_test_batches = int_or(r, "limit_test_batches", t.limit_test_batches, 0);
  r.finish();
  return t;
}

LrSchedulerConfig parse_lr_scheduler(ConfigReader& optimizer, const YAML::Node& raw, const TokensConfig& tokens) {
  check_keys(child(raw, "learning_rate_scheduler"), optimizer.key_path("learning_rate_scheduler"), optimizer.origin(),
             kLrSchedulerKeys);
  ConfigReader r = optimizer.section("learning_rate_scheduler");
  LrSchedulerConfig s;
  s.learning_rate = r.required<double>("learning_rate");
  if (s.learning_rate <= 0) r.fail("learning_rate", "must be > 0, got " + number(s.learning_rate));
  s.lr_warmup_steps = int_or(r, "lr_warmup_steps", 0, 0);
  s.lr_warmup_style = r.choice("lr_warmup_style", {"linear", "constant"}, s.lr_warmup_style);
  s.lr_decay_style = r.choice("lr_decay_style", {"linear", "cosine", "1-sqrt"}, s.lr_decay_style);

  // nanotron's defaults: Config.__post_init__ sets lr_decay_steps = train_steps - lr_warmup_steps;
  // lr_scheduler_builder starts the decay at lr_warmup_steps; LRSchedulerArgs sets
  // min_decay_lr = learning_rate.
  std::optional<int64_t> decay_steps = optional_int(r, "lr_decay_steps", 0);
  // A run shorter than its warm-up (a quick check with --set tokens.train_steps=3) has no decay.
  s.lr_decay_steps = decay_steps ? *decay_steps : std::max<int64_t>(0, tokens.train_steps - s.lr_warmup_steps);
  r.resolved()["lr_decay_steps"] = s.lr_decay_steps;
  std::optional<int64_t> decay_start = optional_int(r, "lr_decay_starting_step", 0);
  s.lr_decay_starting_step = decay_start ? *decay_start : s.lr_warmup_steps;
  r.resolved()["lr_decay_starting_step"] = s.lr_decay_starting_step;
  std::optional<double> min_lr = r.optional<double>("min_decay_lr");
  s.min_decay_lr = min_lr ? *min_lr : s.learning_rate;
  if (s.min_decay_lr < 0) r.fail("min_decay_lr", "must be >= 0, got " + number(s.min_decay_lr));
  if (s.min_decay_lr > s.learning_rate)
    r.fail("min_decay_lr", "is " + number(s.min_decay_lr) + ", more than learning_rate (" + number(s.learning_rate) +
                               "); the decay would raise the learning rate");
  r.resolved()["min_decay_lr"] = s.min_decay_lr;
  r.finish();
  return s;
}

OptimizerConfig parse_optimizer(ConfigReader& root, const YAML::Node& raw, const TokensConfig& tokens) {
  YAML::Node raw_optimizer = child(raw, "optimizer");
  // Older nanotron configs kept AdamW's hyper-parameters directly under optimizer.
  for (const char* old : {"adam_eps", "adam_beta1", "adam_beta2", "torch_adam_is_fused"}) {
    YAML::Node misplaced = child(raw_optimizer, old);
    if (misplaced.IsDefined())
      throw ConfigError(prefix(root.origin()) + "optimizer." + old + line_of(misplaced) +
                        ": unknown key; current nanotron configs put it under optimizer.optimizer_factory "
                        "(with name: adamW)");
  }
  check_keys(raw_optimizer, "optimizer", root.origin(), kOptimizerKeys);
  ConfigReader r = root.section("optimizer");
  OptimizerConfig o;

  // The factory belongs to the optimizer plugin, which reads it strictly; only its name is
  // read here, to choose the plugin.
  // (yaml-cpp: assigning a Node to a Node handle rewrites the node it refers to, so a handle
  // into the document is never assigned; copies are made with Clone.)
  const YAML::Node given = r.raw("optimizer_factory");
  const bool factory_given = given.IsDefined() && !given.IsNull();
  if (factory_given && !given.IsMap())
    r.fail("optimizer_factory", "expected a mapping (name: adamW and the optimizer's hyper-parameters)");
  YAML::Node factory = factory_given ? YAML::Clone(given) : YAML::Node(YAML::NodeType::Map);
  YAML::Node name = child(factory, "name");
  if (name.IsDefined() && !name.IsNull()) {
    if (!name.IsScalar() || name.Scalar().empty())
      throw ConfigError(prefix(root.origin()) + r.key_path("optimizer_factory.name") + line_of(name) +
                        ": expected the optimizer's name (a string such as adamW)");
    o.factory_name = name.Scalar();
  }
  factory["name"] = o.factory_name;
  r.resolved()["optimizer_factory"] = factory;

  o.zero_stage = int_or(r, "zero_stage", o.zero_stage, 0);
  if (o.zero_stage > kMaxZeroStage)
    r.fail("zero_stage", "triax implements ZeRO stages 0 to " + std::to_string(kMaxZeroStage) + ", got " +
                             std::to_string(o.zero_stage));
  o.plugin = lowercase(o.factory_name);
  if (o.zero_stage > 0) o.plugin = "zero" + std::to_string(o.zero_stage) + "_" + o.plugin;

  o.weight_decay = r.get<double>("weight_decay", o.weight_decay);
  if (o.weight_decay < 0) r.fail("weight_decay", "must be >= 0, got " + number(o.weight_decay));
  o.weight_decay_exclude_named_params =
      r.get<std::vector<std::string>>("weight_decay_exclude_named_params", o.weight_decay_exclude_named_params);
  for (size_t i = 0; i < o.weight_decay_exclude_named_params.size(); ++i) {
    const std::string& pattern = o.weight_decay_exclude_named_params[i];
    try {
      std::regex compiled(pattern);
      (void)compiled;
    } catch (const std::regex_error& e) {
      const YAML::Node list = child(raw_optimizer, "weight_decay_exclude_named_params");
      const std::string where = list.IsSequence() && i < list.size() ? line_of(list[i]) : "";
      throw ConfigError(prefix(root.origin()) + r.key_path("weight_decay_exclude_named_params") + "." +
                        std::to_string(i) + where + ": '" + pattern + "' is not a valid regular expression (" +
                        e.what() + ")");
    }
  }

  o.clip_grad = r.optional<double>("clip_grad");
  if (o.clip_grad && *o.clip_grad <= 0)
    r.fail("clip_grad", "must be > 0 (or null for no clipping), got " + number(*o.clip_grad));
  o.accumulate_grad_in_fp32 = r.get<bool>("accumulate_grad_in_fp32", o.accumulate_grad_in_fp32);
  o.learning_rate_scheduler = parse_lr_scheduler(r, raw_optimizer, tokens);
  r.finish();
  o.section = YAML::Clone(r.resolved());
  return o;
}

std::vector<DataStageConfig> parse_data_stages(ConfigReader& root, const YAML::Node& raw, const GeneralConfig& general,
                                               const TokensConfig& tokens) {
  std::vector<DataStageConfig> stages;
  if (!root.contains("data_stages")) {
    root.raw("data_stages");
    DataStageConfig stage;
    stage.name = "default";
    stage.start_training_step = 1;
    stage.data.dataset = YAML::Node(YAML::NodeType::Null);
    stage.data.seed = general.seed;
    stages.push_back(stage);

    YAML::Node data(YAML::NodeType::Map);
    data["dataset"] = YAML::Node(YAML::NodeType::Null);
    data["seed"] = stage.data.seed;
    data["num_loading_workers"] = stage.data.num_loading_workers;
    YAML::Node item(YAML::NodeType::Map);
    item["name"] = stage.name;
    item["start_training_step"] = stage.start_training_step;
    item["data"] = data;
    item["sequence_length"] = tokens.sequence_length;
    YAML::Node list(YAML::NodeType::Sequence);
    list.push_back(item);
    root.resolved()["data_stages"] = list;
    return stages;
  }

  const YAML::Node raw_list = child(raw, "data_stages");
  if (raw_list.IsSequence())
    for (size_t i = 0; i < raw_list.size(); ++i) {
      std::string path = "data_stages." + std::to_string(i);
      check_keys(raw_list[i], path, root.origin(), kDataStageKeys);
      check_keys(child(raw_list[i], "data"), path + ".data", root.origin(), kDataKeys);
    }
  std::vector<ConfigReader> readers = root.section_list("data_stages");
  if (readers.empty()) root.fail("data_stages", "the list is empty; give at least one stage starting at step 1");
  for (auto& r : readers) {
    DataStageConfig stage;
    stage.name = r.required<std::string>("name");
    if (stage.name.empty()) r.fail("name", "must not be empty");
    stage.start_training_step = required_int(r, "start_training_step", 1);

    ConfigReader d = r.section("data");
    YAML::Node dataset = d.raw("dataset");
    if (dataset.IsDefined() && !dataset.IsNull() && !dataset.IsMap())
      d.fail("dataset",
             "expected a mapping (a Hugging Face dataset spec with hf_dataset_or_datasets, or a nanoset "
             "spec with dataset_folder) or null for the synthetic stream");
    stage.data.dataset = dataset.IsDefined() ? YAML::Clone(dataset) : YAML::Node(YAML::NodeType::Null);
    stage.data.seed = int_or(d, "seed", stage.data.seed, 0);
    stage.data.num_loading_workers = int_or(d, "num_loading_workers", stage.data.num_loading_workers, 0);
    d.finish();

    // Newer nanotron lets a stage set its own sequence length; triax trains with one.
    std::optional<int64_t> length = r.optional<int64_t>("sequence_length");
    if (length && *length != tokens.sequence_length)
      r.fail("sequence_length",
             "triax does not implement a per-stage sequence length; remove it or set it to "
             "tokens.sequence_length (" +
                 std::to_string(tokens.sequence_length) + ")");
    r.resolved()["sequence_length"] = tokens.sequence_length;
    r.finish();
    stages.push_back(stage);
  }

  std::map<std::string, size_t> names;
  std::map<int64_t, size_t> starts;
  for (size_t i = 0; i < stages.size(); ++i) {
    auto [name_at, new_name] = names.emplace(stages[i].name, i);
    if (!new_name)
      readers[i].fail("name", "'" + stages[i].name + "' is also the name of data_stages." +
                                  std::to_string(name_at->second) + "; stage names must be unique");
    auto [start_at, new_start] = starts.emplace(stages[i].start_training_step, i);
    if (!new_start)
      readers[i].fail("start_training_step", std::to_string(stages[i].start_training_step) +
                                                 " is also the start of data_stages." +
                                                 std::to_string(start_at->second) + "; start steps must be unique");
  }
  if (!starts.count(1)) {
    std::string listed;
    for (const auto& [start, index] : starts) listed += (listed.empty() ? "" : ", ") + std::to_string(start);
    root.fail("data_stages", "no stage starts at step 1 (start_training_step values: " + listed +
                                 "); the first stage must start at step 1");
  }

  // Sorted by start step, in the config and in resolved().
  std::vector<size_t> order(stages.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&stages](size_t a, size_t b) {
    return stages[a].start_training_step < stages[b].start_training_step;
  });
  std::vector<DataStageConfig> sorted;
  YAML::Node resolved_list(YAML::NodeType::Sequence);
  for (size_t i : order) {
    sorted.push_back(stages[i]);
    resolved_list.push_back(YAML::Clone(readers[i].resolved()));
  }
  root.resolved()["data_stages"] = resolved_list;
  return sorted;
}

LoggingConfig parse_logging(ConfigReader& root, const YAML::Node& raw) {
  check_keys(child(raw, "logging"), "logging", root.origin(), kLoggingKeys);
  ConfigReader r = section_or_empty(root, "logging");
  LoggingConfig l;
  l.log_level = r.choice("log_level", {"debug", "info", "warning", "error", "critical", "passive"}, l.log_level);
  l.log_level_replica =
      r.choice("log_level_replica", {"debug", "info", "warning", "error", "critical", "passive"}, l.log_level_replica);
  l.iteration_step_info_interval = int_or(r, "iteration_step_info_interval", l.iteration_step_info_interval, 1);
  l.peak_tflops = r.optional<double>("peak_tflops");
  if (l.peak_tflops && *l.peak_tflops <= 0)
    r.fail("peak_tflops", "must be > 0 (or null for the device's known peak), got " + number(*l.peak_tflops));
  r.finish();
  return l;
}

PluginsConfig parse_plugins(ConfigReader& root, const YAML::Node& raw) {
  check_keys(child(raw, "plugins"), "plugins", root.origin(), kPluginsKeys);
  ConfigReader r = section_or_empty(root, "plugins");
  PluginsConfig p;
  p.paths = r.get<std::vector<std::string>>("paths", {});
  for (const auto& path : p.paths)
    if (path.empty()) r.fail("paths", "an entry is empty");
  r.finish();
  return p;
}

// Checks between sections that do not depend on the launch.
void check_combinations(const YAML::Node& raw, const TrainConfig& c) {
  if (c.parallelism.tp_mode == "REDUCE_SCATTER" && c.tokens.sequence_length % c.parallelism.tp != 0)
    throw ConfigError(prefix(c.origin) + "tokens.sequence_length" +
                      line_of(child(child(raw, "tokens"), "sequence_length")) + ": " +
                      std::to_string(c.tokens.sequence_length) + " is not divisible by parallelism.tp (" +
                      std::to_string(c.parallelism.tp) +
                      "), which tp_mode REDUCE_SCATTER needs (sequence parallelism splits the sequence)");
}

}  // namespace

TrainConfig parse_train_config(const YAML::Node& document, const std::string& origin) {
  check_keys(document, "", origin, kRootKeys);
  ConfigReader root(document, "", origin);
  const YAML::Node& raw = document;

  TrainConfig c;
  c.origin = origin;
  c.general = parse_general(root, raw);
  c.checkpoints = parse_checkpoints(root, raw, c.general.run);
  c.parallelism = parse_parallelism(root, raw);
  c.model = parse_model(root, raw);
  c.tokenizer = parse_tokenizer(root, raw);
  c.tokens = parse_tokens(root, raw);
  c.optimizer = parse_optimizer(root, raw, c.tokens);
  c.data_stages = parse_data_stages(root, raw, c.general, c.tokens);
  c.logging = parse_logging(root, raw);
  c.plugins = parse_plugins(root, raw);
  reject_unless_null(root, "metrics_logging", "nanotron's metrics_logging (triax writes its own metrics file)");
  reject_unless_null(root, "profiler", "the profiler section");
  reject_unless_null(root, "lighteval", "lighteval evaluation");
  reject_unless_null(root, "s3_upload", "uploading checkpoints to S3");
  root.finish();
  check_combinations(raw, c);

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
  if (p.dp * p.tp * p.pp != world_size)
    throw ConfigError(prefix(config.origin) + "parallelism.dp (" + std::to_string(p.dp) + ") x parallelism.tp (" +
                      std::to_string(p.tp) + ") x parallelism.pp (" + std::to_string(p.pp) +
                      ") = " + std::to_string(p.dp * p.tp * p.pp) + ", but the world size is " +
                      std::to_string(world_size) + "; dp*tp*pp must equal the number of processes");
  if (p.dp % p.expert_parallel_size != 0)
    throw ConfigError(prefix(config.origin) + "parallelism.expert_parallel_size (" +
                      std::to_string(p.expert_parallel_size) + ") must divide parallelism.dp (" + std::to_string(p.dp) +
                      ")");
}

}  // namespace triax
