// The training configuration: nanotron's YAML schema plus triax's additions (plugin names and
// paths, communication backend, device, MFU basis). Parsing is strict (see ConfigReader): an
// unknown key, a wrong type or an impossible combination stops the run before any work with the
// key's path and what was expected. Sections owned by plugins (model.model_config,
// optimizer.optimizer_factory) are kept as YAML and read strictly by the plugin itself.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "triax/report/profiler_options.hpp"

namespace triax {

struct GeneralConfig {
  std::string project = "triax";
  std::string run = "%date_%jobid";  // %date and %jobid are expanded when loading
  int64_t seed = 42;
  std::optional<int64_t> step;
  std::optional<int64_t> consumed_train_samples;
  std::optional<std::string> benchmark_csv_path;
  bool ignore_sanity_checks = true;
  std::string device = "auto";  // triax: auto | cpu | cuda
  // triax, docs/reliability.md: a non-finite loss or gradient norm stops the run or skips the
  // step (at most nonfinite_max_consecutive_skips in a row); these signals stop it with a checkpoint.
  std::string nonfinite_policy = "stop";  // stop | skip
  int64_t nonfinite_max_consecutive_skips = 3;
  std::vector<std::string> preemption_signals = {"SIGTERM", "SIGUSR1"};
  // triax: capture each step's forward and backward once as a CUDA graph and replay it
  bool cuda_graphs = false;
};

struct CheckpointsConfig {
  std::string checkpoints_path;  // also the run folder (resolved config, metrics)
  int64_t checkpoint_interval = 0;
  bool save_initial_state = false;
  bool save_final_state = false;
  std::optional<std::string> resume_checkpoint_path;
  bool load_lr_scheduler = true;
  bool load_optimizer = true;
  bool checkpoints_path_is_shared_file_system = false;
  int64_t keep_last = 0;  // triax: keep only the newest N complete checkpoints; 0 keeps all
  bool async_save = false;  // triax: copy to host memory, write in the background (docs/reliability.md)
};

struct ParallelismConfig {
  int64_t dp = 1;
  int64_t pp = 1;
  int64_t tp = 1;
  int64_t expert_parallel_size = 1;
  // Ranks holding slices of the same sequences (context parallelism); 1: none.
  int64_t context_parallel_size = 1;
  // triax: how attention reaches the other cp ranks' keys: all_gather | ring
  std::string context_parallel_attention = "all_gather";
  std::string pp_engine = "afab";      // the engine plugin's name (nanotron's default)
  std::string tp_mode = "ALL_REDUCE";  // ALL_REDUCE | REDUCE_SCATTER
  bool tp_linear_async_communication = false;
  bool recompute_layer = false;        // recompute each layer's activations in the backward pass
  bool moe_layer_recompute = false;    // the same for MoE layers only
  bool tp_recompute_allgather = true;  // REDUCE_SCATTER: all-gather the input again in backward
  // triax: with recompute_layer, recompute only the first this many layers of each pipeline stage
  std::optional<int64_t> recompute_num_layers;
  // triax: the MLP's activation output recomputed in backward instead of kept (selective)
  bool recompute_mlp_activation = false;
  std::string comm_backend = "auto";   // triax: auto | mpi | nccl
  double comm_timeout_seconds = 300;   // triax: a peer silent this long fails the run, naming it
  // triax: model chunks per pipeline rank for engines that interleave them (interleaved_1f1b)
  int64_t pp_chunks_per_rank = 1;
  // triax: blocks (embedding, each layer, head) per virtual stage (pp x pp_chunks_per_rank of
  // them; one per pipeline rank with one chunk); default: balanced by cost
  std::optional<std::vector<int64_t>> pp_blocks_per_stage;
  // triax: [F, B, W], the times of one micro-batch's forward, input backward and weight backward
  // through one stage, by which the zero-bubble engines order their passes; default equal
  std::optional<std::vector<double>> pp_pass_times;
  // triax: each rank records the wall time of every pass and transfer of its pipeline engine and the
  // step's parts outside the engine, a JSON line per step (docs/pipeline-schedules.md)
  bool pp_pass_record = false;
  YAML::Node section;                  // the whole section as read, for the engine plugin
};

struct ModelSection {
  // triax: the model plugin's name; empty: chosen when plugins are loaded (by the nanotron marker
  // key in model_config, or by the architecture of the Hugging Face folder init_method.path names)
  std::string plugin;
  YAML::Node model_config;         // read by the plugin; null: from init_method.path's config.json
  YAML::Node init_method;          // {std: ...} or {path: ...}
  std::string dtype = "bfloat16";  // float32 | bfloat16 | float16 | float64
  int64_t make_vocab_size_divisible_by = 1;
  int64_t ddp_bucket_cap_mb = 25;
};

struct TokenizerConfig {
  std::optional<std::string> tokenizer_name_or_path;
  std::optional<std::string> tokenizer_revision;
  std::optional<int64_t> tokenizer_max_length;
};

struct TokensConfig {
  int64_t sequence_length = 0;
  int64_t train_steps = 0;
  int64_t micro_batch_size = 0;
  int64_t batch_accumulation_per_replica = 1;
  int64_t val_check_interval = -1;  // > 0: validate every so many steps and at the last
  int64_t limit_val_batches = 0;    // validation micro-batches per data-parallel replica
  int64_t limit_test_batches = 0;
};

// Resolved: defaults of nanotron applied (lr_decay_steps, lr_decay_starting_step, min_decay_lr).
struct LrSchedulerConfig {
  double learning_rate = 0.0;
  int64_t lr_warmup_steps = 0;
  std::string lr_warmup_style = "linear";  // linear | constant
  std::string lr_decay_style = "linear";   // linear | cosine | 1-sqrt
  int64_t lr_decay_steps = 0;              // default: train_steps - lr_warmup_steps
  int64_t lr_decay_starting_step = 0;      // default: lr_warmup_steps
  double min_decay_lr = 0.0;               // default: learning_rate
};

struct OptimizerConfig {
  std::string factory_name = "adamW";  // optimizer_factory.name
  std::string plugin;                  // resolved plugin name: "adamw", "zero1_adamw", ...
  int64_t zero_stage = 0;
  double weight_decay = 0.0;
  std::vector<std::string> weight_decay_exclude_named_params;  // regular expressions
  std::optional<double> clip_grad;
  bool accumulate_grad_in_fp32 = true;
  LrSchedulerConfig learning_rate_scheduler;
  YAML::Node section;  // the whole section, for the optimizer plugin
};

// data_stages[].data.validation: the held-out data a stage validates on (docs/data-format.md).
struct ValidationDataConfig {
  std::optional<double> held_out_fraction;  // of every training folder's samples, never trained on
  YAML::Node dataset;                       // or token folders of its own: a nanoset section
  bool given() const { return held_out_fraction || (dataset.IsDefined() && !dataset.IsNull()); }
};

// The data sources a stage names by default (data.source); triax/data/source_registry.hpp lists
// every source.
inline constexpr const char* kSyntheticSource = "synthetic";          // dataset: null
inline constexpr const char* kTokenFoldersSource = "token_folders";  // a nanoset dataset section

struct DataConfig {
  // data.source: the source of the stage's samples; absent, synthetic for a null dataset and
  // token_folders for a dataset section. Checked against the sources when the data is opened.
  std::string source;
  YAML::Node dataset;  // null: the built-in synthetic stream
  int64_t seed = 42;
  int64_t num_loading_workers = 1;
  ValidationDataConfig validation;
};

struct DataStageConfig {
  std::string name;
  int64_t start_training_step = 1;
  DataConfig data;
};

struct LoggingConfig {
  std::string log_level = "info";
  std::string log_level_replica = "info";
  int64_t iteration_step_info_interval = 1;
  std::optional<double> peak_tflops;  // triax: per-device peak used for MFU (default: by device)
  bool tensorboard = true;            // triax: TensorBoard event files beside metrics.jsonl
  std::optional<std::string> tensorboard_dir;  // triax: their folder (default: the run folder)
  // triax: one live progress line between log lines, on a terminal only
  std::string progress = "auto";  // auto | always | never
};

// nanotron's profiler section: a LibTorch profiler trace of chosen steps, as
// torch.profiler.schedule counts them (skip_first, then repeat x (wait, warmup, active)).
struct ProfilerConfig {
  // The keys, as the step profiler takes them: profiler_export_path is options.export_path;
  // options.key is filled in by whoever hands them over (it names the config file).
  ProfilerOptions options;
  bool export_chrome_trace = false;  // the trace is a Chrome trace either way
};

struct PluginsConfig {
  std::vector<std::string> paths;  // triax: extra folders searched for plugin libraries
};

struct TrainConfig {
  GeneralConfig general;
  CheckpointsConfig checkpoints;
  ParallelismConfig parallelism;
  ModelSection model;
  TokenizerConfig tokenizer;
  TokensConfig tokens;
  OptimizerConfig optimizer;
  std::vector<DataStageConfig> data_stages;  // sorted by start_training_step; first starts at 1
  LoggingConfig logging;
  std::optional<ProfilerConfig> profiler;  // null or absent: no profiling
  std::optional<std::string> fp8_yaml;     // the fp8 section (docs/fp8.md); absent: no fp8
  PluginsConfig plugins;

  std::string origin;   // the file it came from
  YAML::Node resolved;  // everything as used, defaults included

  // Folder of this run's outputs (resolved config, metrics, checkpoints).
  std::string run_dir() const { return checkpoints.checkpoints_path; }
};

// Reads `file`, applies "--set key.path=value" overrides in order, parses strictly.
TrainConfig load_train_config(const std::string& file, const std::vector<std::string>& overrides = {});

// Parses an already loaded document; `origin` names it in messages.
TrainConfig parse_train_config(const YAML::Node& root, const std::string& origin);

// Checks what depends on the launch: dp x tp x pp must equal the world size, ...
void validate_for_world(const TrainConfig& config, int world_size);

}  // namespace triax
