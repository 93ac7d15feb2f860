// Tests of the configuration loader: nanotron's tiny example loads, defaults are applied and
// recorded, and every kind of mistake stops with the file, the key's path and what was expected.
#include "triax/core/config.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <regex>
#include <string>

#include "triax/config_reader.hpp"
#include "triax/error.hpp"

namespace triax {
namespace {

const std::string kDataDir = TRIAX_TEST_DATA_DIR;
const std::string kTiny = kDataDir + "/nanotron_config_tiny_llama.yaml";
const std::string kMinimal = kDataDir + "/minimal.yaml";

const char* kMinimalText = R"(
model:
  model_config: {hidden_size: 16}
  init_method: {std: 0.02}
tokens:
  sequence_length: 32
  train_steps: 10
  micro_batch_size: 2
  batch_accumulation_per_replica: 1
optimizer:
  learning_rate_scheduler:
    learning_rate: 0.001
)";

TrainConfig parse(const std::string& text) { return parse_train_config(YAML::Load(text), "test.yaml"); }

// The minimal config with `extra` YAML merged in through overrides-like edits of the tree.
TrainConfig parse_minimal_with(const std::vector<std::string>& sets) {
  YAML::Node root = YAML::Load(kMinimalText);
  for (const auto& s : sets) apply_override(root, s);
  return parse_train_config(root, "test.yaml");
}

// The message of the ConfigError `fn` throws; fails the test when it throws none.
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError";
  return "";
}

std::string minimal_error(const std::vector<std::string>& sets) {
  return error_of([&] { parse_minimal_with(sets); });
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

TEST(Config, NanotronTinyLlamaLoads) {
  TrainConfig c = load_train_config(kTiny);
  EXPECT_EQ(c.origin, kTiny);
  EXPECT_EQ(c.general.project, "debug");
  EXPECT_TRUE(starts_with(c.general.run, "tiny_llama_")) << c.general.run;
  EXPECT_EQ(c.general.run.find('%'), std::string::npos) << c.general.run;
  EXPECT_EQ(c.general.seed, 42);
  EXPECT_FALSE(c.general.step.has_value());
  EXPECT_TRUE(c.general.ignore_sanity_checks);

  EXPECT_EQ(c.checkpoints.checkpoints_path, "/fsx/nouamane/projects/nanotron/checkpoints");
  EXPECT_EQ(c.checkpoints.checkpoint_interval, 10);
  EXPECT_FALSE(c.checkpoints.resume_checkpoint_path.has_value());
  EXPECT_EQ(c.run_dir(), c.checkpoints.checkpoints_path);

  EXPECT_EQ(c.parallelism.dp, 2);
  EXPECT_EQ(c.parallelism.pp, 2);
  EXPECT_EQ(c.parallelism.tp, 2);
  EXPECT_EQ(c.parallelism.pp_engine, "1f1b");
  EXPECT_EQ(c.parallelism.tp_mode, "REDUCE_SCATTER");
  EXPECT_TRUE(c.parallelism.tp_linear_async_communication);
  EXPECT_FALSE(c.parallelism.recompute_layer);
  EXPECT_EQ(c.parallelism.comm_backend, "auto");
  EXPECT_EQ(c.parallelism.section["tp"].as<int>(), 2);
  EXPECT_FALSE(c.parallelism.section["recompute_layer"].as<bool>());  // defaults included
  EXPECT_EQ(c.parallelism.section["comm_backend"].as<std::string>(), "auto");

  EXPECT_EQ(c.model.plugin, "");  // chosen by the marker key once plugins are loaded
  EXPECT_EQ(c.model.dtype, "bfloat16");
  EXPECT_EQ(c.model.model_config["hidden_size"].as<int>(), 16);
  EXPECT_EQ(c.model.model_config["vocab_size"].as<int>(), 256);
  EXPECT_DOUBLE_EQ(c.model.init_method["std"].as<double>(), 0.025);
  EXPECT_EQ(c.model.ddp_bucket_cap_mb, 25);

  EXPECT_EQ(*c.tokenizer.tokenizer_name_or_path, "gpt2");
  EXPECT_FALSE(c.tokenizer.tokenizer_max_length.has_value());

  EXPECT_EQ(c.tokens.sequence_length, 256);
  EXPECT_EQ(c.tokens.train_steps, 15);
  EXPECT_EQ(c.tokens.micro_batch_size, 2);
  EXPECT_EQ(c.tokens.batch_accumulation_per_replica, 1);
  EXPECT_EQ(c.tokens.val_check_interval, -1);

  EXPECT_EQ(c.optimizer.factory_name, "adamW");
  EXPECT_EQ(c.optimizer.plugin, "adamw");
  EXPECT_EQ(c.optimizer.zero_stage, 0);
  EXPECT_DOUBLE_EQ(c.optimizer.weight_decay, 0.01);
  ASSERT_TRUE(c.optimizer.clip_grad.has_value());
  EXPECT_DOUBLE_EQ(*c.optimizer.clip_grad, 1.0);
  EXPECT_TRUE(c.optimizer.accumulate_grad_in_fp32);
  EXPECT_TRUE(c.optimizer.weight_decay_exclude_named_params.empty());
  const LrSchedulerConfig& lr = c.optimizer.learning_rate_scheduler;
  EXPECT_DOUBLE_EQ(lr.learning_rate, 0.0003);
  EXPECT_EQ(lr.lr_warmup_steps, 2);
  EXPECT_EQ(lr.lr_warmup_style, "linear");
  EXPECT_EQ(lr.lr_decay_style, "cosine");
  EXPECT_EQ(lr.lr_decay_steps, 13);
  EXPECT_EQ(lr.lr_decay_starting_step, 2);  // null: lr_warmup_steps
  EXPECT_DOUBLE_EQ(lr.min_decay_lr, 1e-5);
  EXPECT_DOUBLE_EQ(c.optimizer.section["optimizer_factory"]["adam_beta2"].as<double>(), 0.95);
  EXPECT_TRUE(c.optimizer.section["optimizer_factory"]["torch_adam_is_fused"].as<bool>());
  EXPECT_EQ(c.optimizer.section["learning_rate_scheduler"]["lr_decay_starting_step"].as<int>(), 2);

  ASSERT_EQ(c.data_stages.size(), 2u);
  EXPECT_EQ(c.data_stages[0].name, "Stable Training Stage");
  EXPECT_EQ(c.data_stages[0].start_training_step, 1);
  EXPECT_EQ(c.data_stages[1].name, "Annealing Phase");
  EXPECT_EQ(c.data_stages[1].start_training_step, 10);
  EXPECT_EQ(c.data_stages[0].data.dataset["hf_dataset_or_datasets"].as<std::string>(), "stas/openwebtext-10k");
  EXPECT_EQ(c.data_stages[1].data.seed, 42);
  EXPECT_EQ(c.data_stages[1].data.num_loading_workers, 1);

  EXPECT_EQ(c.logging.log_level, "info");
  EXPECT_EQ(c.logging.iteration_step_info_interval, 1);
  EXPECT_TRUE(c.plugins.paths.empty());

  EXPECT_EQ(c.resolved["general"]["run"].as<std::string>(), c.general.run);
  EXPECT_EQ(c.resolved["optimizer"]["learning_rate_scheduler"]["lr_decay_starting_step"].as<int>(), 2);
  EXPECT_TRUE(c.resolved["profiler"].IsNull());
}

TEST(Config, NanotronTinyLlamaNeedsEightProcesses) {
  TrainConfig c = load_train_config(kTiny);
  EXPECT_NO_THROW(validate_for_world(c, 8));
  std::string message = error_of([&] { validate_for_world(c, 1); });
  EXPECT_TRUE(starts_with(message, kTiny + ": ")) << message;
  for (const char* part : {"parallelism.dp (2)", "parallelism.tp (2)", "parallelism.pp (2)", "= 8", "world size is 1"})
    EXPECT_NE(message.find(part), std::string::npos) << part << " in " << message;
}

TEST(Config, MinimalGetsDocumentedDefaults) {
  TrainConfig c = load_train_config(kMinimal);
  EXPECT_EQ(c.general.project, "triax");
  EXPECT_EQ(c.general.seed, 42);
  EXPECT_EQ(c.general.device, "auto");
  EXPECT_EQ(c.checkpoints.checkpoints_path, "runs/" + c.general.run);
  EXPECT_EQ(c.checkpoints.checkpoint_interval, 0);
  EXPECT_TRUE(c.checkpoints.load_optimizer);
  EXPECT_EQ(c.parallelism.dp * c.parallelism.tp * c.parallelism.pp, 1);
  EXPECT_EQ(c.parallelism.pp_engine, "afab");
  EXPECT_EQ(c.parallelism.tp_mode, "ALL_REDUCE");
  EXPECT_TRUE(c.parallelism.tp_recompute_allgather);
  EXPECT_EQ(c.model.plugin, "");  // chosen by the marker key once plugins are loaded
  EXPECT_EQ(c.model.dtype, "bfloat16");
  EXPECT_EQ(c.model.make_vocab_size_divisible_by, 1);
  EXPECT_EQ(c.optimizer.factory_name, "adamW");
  EXPECT_EQ(c.optimizer.plugin, "adamw");
  EXPECT_FALSE(c.optimizer.clip_grad.has_value());
  EXPECT_DOUBLE_EQ(c.optimizer.weight_decay, 0.0);
  const LrSchedulerConfig& lr = c.optimizer.learning_rate_scheduler;
  EXPECT_EQ(lr.lr_warmup_steps, 0);
  EXPECT_EQ(lr.lr_warmup_style, "linear");
  EXPECT_EQ(lr.lr_decay_style, "linear");
  EXPECT_EQ(lr.lr_decay_steps, 10);  // train_steps - lr_warmup_steps
  EXPECT_EQ(lr.lr_decay_starting_step, 0);
  EXPECT_DOUBLE_EQ(lr.min_decay_lr, 0.001);
  EXPECT_EQ(c.tokens.val_check_interval, -1);
  EXPECT_EQ(c.logging.log_level, "info");
  EXPECT_EQ(c.logging.log_level_replica, "info");
  EXPECT_FALSE(c.logging.peak_tflops.has_value());
  EXPECT_FALSE(c.tokenizer.tokenizer_name_or_path.has_value());

  // resolved() holds every default.
  const YAML::Node& r = c.resolved;
  EXPECT_EQ(r["general"]["seed"].as<int>(), 42);
  EXPECT_EQ(r["general"]["run"].as<std::string>(), c.general.run);
  EXPECT_EQ(r["checkpoints"]["checkpoints_path"].as<std::string>(), "runs/" + c.general.run);
  EXPECT_FALSE(r["checkpoints"]["save_final_state"].as<bool>());
  EXPECT_EQ(r["parallelism"]["dp"].as<int>(), 1);
  EXPECT_EQ(r["parallelism"]["pp_engine"].as<std::string>(), "afab");
  EXPECT_EQ(r["model"]["dtype"].as<std::string>(), "bfloat16");
  EXPECT_TRUE(r["model"]["plugin"].IsNull());  // recorded once chosen
  EXPECT_EQ(r["optimizer"]["zero_stage"].as<int>(), 0);
  EXPECT_EQ(r["optimizer"]["optimizer_factory"]["name"].as<std::string>(), "adamW");
  EXPECT_TRUE(r["optimizer"]["clip_grad"].IsNull());
  EXPECT_EQ(r["optimizer"]["learning_rate_scheduler"]["lr_decay_steps"].as<int>(), 10);
  EXPECT_DOUBLE_EQ(r["optimizer"]["learning_rate_scheduler"]["min_decay_lr"].as<double>(), 0.001);
  EXPECT_EQ(r["tokens"]["limit_val_batches"].as<int>(), 0);
  EXPECT_EQ(r["logging"]["iteration_step_info_interval"].as<int>(), 1);
  EXPECT_TRUE(r["plugins"]["paths"].IsSequence());
  EXPECT_EQ(r["data_stages"][0]["name"].as<std::string>(), "default");
  EXPECT_TRUE(r["data_stages"][0]["data"]["dataset"].IsNull());
  EXPECT_EQ(c.optimizer.section["learning_rate_scheduler"]["lr_decay_steps"].as<int>(), 10);
  EXPECT_EQ(c.parallelism.section["tp_mode"].as<std::string>(), "ALL_REDUCE");
}

// The resolved config is itself a valid config that gives the same values.
TEST(Config, ResolvedParsesToTheSameConfig) {
  for (const std::string& file : {kTiny, kMinimal}) {
    TrainConfig first = load_train_config(file);
    TrainConfig again = parse_train_config(first.resolved, "resolved.yaml");
    EXPECT_EQ(to_yaml_text(again.resolved), to_yaml_text(first.resolved)) << file;
    EXPECT_EQ(again.general.run, first.general.run);
    EXPECT_EQ(again.optimizer.plugin, first.optimizer.plugin);
  }
}

TEST(Config, DataStagesDefaultToOneSyntheticStage) {
  TrainConfig c = parse_minimal_with({"general.seed=7"});
  ASSERT_EQ(c.data_stages.size(), 1u);
  EXPECT_EQ(c.data_stages[0].name, "default");
  EXPECT_EQ(c.data_stages[0].start_training_step, 1);
  EXPECT_TRUE(c.data_stages[0].data.dataset.IsNull());
  EXPECT_EQ(c.data_stages[0].data.seed, 7);  // general.seed
  EXPECT_EQ(c.resolved["data_stages"][0]["data"]["seed"].as<int>(), 7);

  TrainConfig explicit_null = parse_minimal_with({"data_stages=null"});
  ASSERT_EQ(explicit_null.data_stages.size(), 1u);
  EXPECT_EQ(explicit_null.data_stages[0].name, "default");
}

TEST(Config, DataStagesAreSortedAndKeepNanosetSpecs) {
  TrainConfig c = parse(std::string(kMinimalText) + R"(
data_stages:
- name: anneal
  start_training_step: 8
  data:
    dataset:
      dataset_folder: [a, b]
      dataset_weights: [0.3, 0.7]
    seed: 5
- name: stable
  start_training_step: 1
  data: {dataset: null, num_loading_workers: 0}
)");
  ASSERT_EQ(c.data_stages.size(), 2u);
  EXPECT_EQ(c.data_stages[0].name, "stable");
  EXPECT_TRUE(c.data_stages[0].data.dataset.IsNull());
  EXPECT_EQ(c.data_stages[0].data.seed, 42);
  EXPECT_EQ(c.data_stages[0].data.num_loading_workers, 0);
  EXPECT_EQ(c.data_stages[1].name, "anneal");
  EXPECT_EQ(c.data_stages[1].data.seed, 5);
  EXPECT_EQ(c.data_stages[1].data.dataset["dataset_folder"][1].as<std::string>(), "b");
  EXPECT_DOUBLE_EQ(c.data_stages[1].data.dataset["dataset_weights"][0].as<double>(), 0.3);
  EXPECT_EQ(c.resolved["data_stages"][0]["name"].as<std::string>(), "stable");
  EXPECT_EQ(c.resolved["data_stages"][1]["name"].as<std::string>(), "anneal");
}

TEST(Config, NamesAndSpellingsAreNormalised) {
  TrainConfig c =
      parse_minimal_with({"model.dtype=torch.float32", "parallelism.tp_mode=reduce_scatter", "parallelism.tp=2",
                          "optimizer.zero_stage=1", "optimizer.optimizer_factory={name: adamW, adam_eps: 1.0e-8}"});
  EXPECT_EQ(c.model.dtype, "float32");
  EXPECT_EQ(c.resolved["model"]["dtype"].as<std::string>(), "float32");
  EXPECT_EQ(c.parallelism.tp_mode, "REDUCE_SCATTER");
  EXPECT_EQ(c.optimizer.plugin, "zero1_adamw");
  EXPECT_DOUBLE_EQ(c.optimizer.section["optimizer_factory"]["adam_eps"].as<double>(), 1e-8);

  TrainConfig sgd = parse_minimal_with({"optimizer.optimizer_factory.name=SGD"});
  EXPECT_EQ(sgd.optimizer.factory_name, "SGD");
  EXPECT_EQ(sgd.optimizer.plugin, "sgd");
}

TEST(Config, UnknownTopLevelKeyListsKnownKeys) {
  std::string message = minimal_error({"optimiser.zero_stage=1"});
  EXPECT_TRUE(starts_with(message, "test.yaml: optimiser")) << message;
  EXPECT_NE(message.find("unknown key"), std::string::npos) << message;
  EXPECT_NE(message.find("optimizer"), std::string::npos) << message;
  EXPECT_NE(message.find("data_stages"), std::string::npos) << message;
}

TEST(Config, UnknownNestedKeyListsKnownKeys) {
  std::string message = minimal_error({"optimizer.learning_rate_scheduler.lr_warmup=3"});
  EXPECT_TRUE(starts_with(message, "test.yaml: optimizer.learning_rate_scheduler.lr_warmup")) << message;
  EXPECT_NE(message.find("unknown key"), std::string::npos) << message;
  EXPECT_NE(message.find("lr_warmup_steps"), std::string::npos) << message;

  message = minimal_error({"data_stages=[{name: a, start_training_step: 1, data: {sed: 3}}]"});
  EXPECT_TRUE(starts_with(message, "test.yaml: data_stages.0.data.sed")) << message;
  EXPECT_NE(message.find("num_loading_workers"), std::string::npos) << message;

  message = minimal_error({"parallelism.pipeline=2"});
  EXPECT_TRUE(starts_with(message, "test.yaml: parallelism.pipeline")) << message;
}

TEST(Config, MisspeltRequiredKeyIsReportedAsUnknown) {
  std::string message = error_of([] {
    parse(R"(
model: {model_config: {a: 1}, init_method: {std: 0.02}}
tokens: {sequence_length: 32, train_step: 10, micro_batch_size: 2, batch_accumulation_per_replica: 1}
optimizer: {learning_rate_scheduler: {learning_rate: 0.001}}
)");
  });
  EXPECT_TRUE(starts_with(message, "test.yaml: tokens.train_step (line 3): unknown key")) << message;
  EXPECT_NE(message.find("train_steps"), std::string::npos) << message;
}

TEST(Config, WrongTypeNamesFileKeyAndLine) {
  std::string text = std::string(kMinimalText) + "  clip_grad: abc\n";
  std::string message = error_of([&] { parse(text); });
  EXPECT_EQ(message, "test.yaml: optimizer.clip_grad (line 13): expected a number, got 'abc'");

  message = minimal_error({"tokens.micro_batch_size=1.5"});
  EXPECT_TRUE(starts_with(message, "test.yaml: tokens.micro_batch_size")) << message;
  EXPECT_NE(message.find("expected an integer"), std::string::npos) << message;

  message = minimal_error({"parallelism.tp_linear_async_communication=maybe"});
  EXPECT_NE(message.find("parallelism.tp_linear_async_communication"), std::string::npos) << message;
  EXPECT_NE(message.find("true or false"), std::string::npos) << message;

  message = minimal_error({"model.model_config=16"});
  EXPECT_TRUE(starts_with(message, "test.yaml: model.model_config")) << message;
  message = minimal_error({"model.init_method=[1, 2]"});
  EXPECT_TRUE(starts_with(message, "test.yaml: model.init_method")) << message;
  EXPECT_NE(message.find("mapping"), std::string::npos) << message;
  message = minimal_error({"optimizer.optimizer_factory=adamW"});
  EXPECT_TRUE(starts_with(message, "test.yaml: optimizer.optimizer_factory")) << message;
  message = minimal_error({"optimizer.weight_decay_exclude_named_params=bias"});
  EXPECT_NE(message.find("a list of strings"), std::string::npos) << message;
  message = minimal_error({"data_stages=[{name: a, start_training_step: 1, data: {dataset: some/name}}]"});
  EXPECT_TRUE(starts_with(message, "test.yaml: data_stages.0.data.dataset")) << message;
}

TEST(Config, MissingRequiredKeys) {
  YAML::Node root = YAML::Load(kMinimalText);
  root["tokens"].remove("sequence_length");
  std::string message = error_of([&] { parse_train_config(root, "test.yaml"); });
  EXPECT_TRUE(starts_with(message, "test.yaml: tokens.sequence_length")) << message;
  EXPECT_NE(message.find("required key is missing"), std::string::npos) << message;

  root = YAML::Load(kMinimalText);
  root.remove("model");
  message = error_of([&] { parse_train_config(root, "test.yaml"); });
  EXPECT_TRUE(starts_with(message, "test.yaml: model")) << message;
  EXPECT_NE(message.find("required"), std::string::npos) << message;

  root = YAML::Load(kMinimalText);
  root["optimizer"]["learning_rate_scheduler"].remove("learning_rate");
  message = error_of([&] { parse_train_config(root, "test.yaml"); });
  EXPECT_TRUE(starts_with(message, "test.yaml: optimizer.learning_rate_scheduler.learning_rate")) << message;

  root = YAML::Load(kMinimalText);
  root["model"].remove("init_method");
  message = error_of([&] { parse_train_config(root, "test.yaml"); });
  EXPECT_TRUE(starts_with(message, "test.yaml: model.init_method")) << message;

  message = minimal_error({"checkpoints.checkpoint_interval=5"});
  EXPECT_TRUE(starts_with(message, "test.yaml: checkpoints.checkpoints_path")) << message;

  message = minimal_error({"data_stages=[{name: a, start_training_step: 1}]"});
  EXPECT_TRUE(starts_with(message, "test.yaml: data_stages.0.data")) << message;
}

struct Impossible {
  std::vector<std::string> sets;
  std::string key;  // the message starts with "test.yaml: " + key
  std::string contains;
};

TEST(Config, ImpossibleValuesAreRefused) {
  const std::vector<Impossible> cases = {
      {{"tokens.micro_batch_size=0"}, "tokens.micro_batch_size", "at least 1"},
      {{"tokens.train_steps=-3"}, "tokens.train_steps", "at least 1"},
      {{"parallelism.dp=0"}, "parallelism.dp", "at least 1"},
      {{"optimizer.learning_rate_scheduler.lr_decay_style=exponential"},
       "optimizer.learning_rate_scheduler.lr_decay_style",
       "linear, cosine, 1-sqrt"},
      {{"optimizer.learning_rate_scheduler.lr_warmup_style=cosine"},
       "optimizer.learning_rate_scheduler.lr_warmup_style",
       "linear, constant"},
      {{"optimizer.learning_rate_scheduler.learning_rate=0"}, "optimizer.learning_rate_scheduler.learning_rate", "> 0"},
      {{"optimizer.learning_rate_scheduler.min_decay_lr=0.01"},
       "optimizer.learning_rate_scheduler.min_decay_lr",
       "more than learning_rate"},
      {{"optimizer.clip_grad=0"}, "optimizer.clip_grad", "> 0"},
      {{"optimizer.clip_grad=-1.0"}, "optimizer.clip_grad", "> 0"},
      {{"optimizer.weight_decay_exclude_named_params=['.*bias', '(unclosed']"},
       "optimizer.weight_decay_exclude_named_params.1",
       "not a valid regular expression"},
      {{"optimizer.zero_stage=3"}, "optimizer.zero_stage", "ZeRO stages 0 to 1"},
      {{"model.dtype=int8"}, "model.dtype", "float32, bfloat16, float16, float64"},
      {{"model.make_vocab_size_divisible_by=0"}, "model.make_vocab_size_divisible_by", "at least 1"},
      {{"parallelism.tp_mode=SPLIT"}, "parallelism.tp_mode", "ALL_REDUCE, REDUCE_SCATTER"},
      {{"parallelism.comm_backend=gloo"}, "parallelism.comm_backend", "auto, mpi, nccl"},
      {{"parallelism.context_parallel_size=2"}, "parallelism.context_parallel_size", "context parallelism"},
      {{"general.device=tpu"}, "general.device", "auto, cpu, cuda"},
      {{"logging.log_level=verbose"}, "logging.log_level", "passive"},
      {{"logging.peak_tflops=0"}, "logging.peak_tflops", "> 0"},
      {{"profiler={profiler_export_path: tb}"}, "profiler", "triax does not implement"},
      {{"lighteval={batch_size: 4}"}, "lighteval", "set it to null"},
      {{"s3_upload={upload_s3_path: s3://x}"}, "s3_upload", "set it to null"},
      {{"metrics_logging={log_level: 1}"}, "metrics_logging", "set it to null"},
      {{"parallelism.tp=3", "parallelism.tp_mode=REDUCE_SCATTER"},
       "tokens.sequence_length",
       "not divisible by parallelism.tp (3)"},
      {{"data_stages=[{name: a, start_training_step: 2, data: {}}, {name: b, start_training_step: 5, data: {}}]"},
       "data_stages",
       "no stage starts at step 1 (start_training_step values: 2, 5)"},
      {{"data_stages=[{name: a, start_training_step: 1, data: {}}, {name: a, start_training_step: 5, data: {}}]"},
       "data_stages.1.name",
       "also the name of data_stages.0"},
      {{"data_stages=[{name: a, start_training_step: 1, data: {}}, {name: b, start_training_step: 1, data: {}}]"},
       "data_stages.1.start_training_step",
       "start steps must be unique"},
      {{"data_stages=[{name: a, start_training_step: 0, data: {}}]"},
       "data_stages.0.start_training_step",
       "at least 1"},
      {{"data_stages=[]"}, "data_stages", "empty"},
      {{"data_stages=[{name: a, start_training_step: 1, sequence_length: 64, data: {}}]"},
       "data_stages.0.sequence_length",
       "per-stage sequence length"},
  };
  for (const auto& c : cases) {
    std::string message = minimal_error(c.sets);
    EXPECT_TRUE(starts_with(message, "test.yaml: " + c.key)) << c.sets[0] << " -> " << message;
    EXPECT_NE(message.find(c.contains), std::string::npos) << c.sets[0] << " -> " << message;
  }
}

TEST(Config, OlderOptimizerLayoutGetsAHint) {
  std::string message = minimal_error({"optimizer.adam_beta1=0.9"});
  EXPECT_TRUE(starts_with(message, "test.yaml: optimizer.adam_beta1")) << message;
  EXPECT_NE(message.find("optimizer.optimizer_factory"), std::string::npos) << message;
}

TEST(Config, OverridesApplyInOrder) {
  TrainConfig c = load_train_config(
      kTiny, {"tokens.train_steps=20", "optimizer.learning_rate_scheduler.lr_warmup_steps=4",
              "data_stages.1.data.seed=7", "optimizer.clip_grad=null", "parallelism.dp=1", "parallelism.dp=4",
              "plugins.paths=[a, b]", "optimizer.optimizer_factory.adam_beta1=0.8"});
  EXPECT_EQ(c.tokens.train_steps, 20);
  EXPECT_EQ(c.optimizer.learning_rate_scheduler.lr_warmup_steps, 4);
  EXPECT_EQ(c.optimizer.learning_rate_scheduler.lr_decay_starting_step, 4);
  EXPECT_EQ(c.data_stages[1].data.seed, 7);
  EXPECT_EQ(c.data_stages[0].data.seed, 42);
  EXPECT_FALSE(c.optimizer.clip_grad.has_value());
  EXPECT_EQ(c.parallelism.dp, 4);
  ASSERT_EQ(c.plugins.paths.size(), 2u);
  EXPECT_EQ(c.plugins.paths[1], "b");
  EXPECT_DOUBLE_EQ(c.optimizer.section["optimizer_factory"]["adam_beta1"].as<double>(), 0.8);
  EXPECT_EQ(c.resolved["tokens"]["train_steps"].as<int>(), 20);

  // A new section created by an override.
  TrainConfig created = load_train_config(kMinimal, {"general.device=cpu", "logging.peak_tflops=100"});
  EXPECT_EQ(created.general.device, "cpu");
  EXPECT_DOUBLE_EQ(*created.logging.peak_tflops, 100.0);
}

TEST(Config, BadOverridesNameTheFile) {
  // A key that an override creates is still checked.
  std::string message = error_of([] { load_train_config(kMinimal, {"optimizer.momentum=0.9"}); });
  EXPECT_TRUE(starts_with(message, kMinimal + ": optimizer.momentum")) << message;
  EXPECT_NE(message.find("unknown key"), std::string::npos) << message;

  for (const char* bad :
       {"tokens.train_steps", "=5", "tokens..train_steps=5", "data_stages.5.name=x", "tokens.train_steps=[1, 2"}) {
    message = error_of([&] { load_train_config(kTiny, {bad}); });
    EXPECT_TRUE(starts_with(message, kTiny + ": --set ")) << bad << " -> " << message;
  }
  message = error_of([] { load_train_config(kMinimal, {"tokens.train_steps=abc"}); });
  EXPECT_TRUE(starts_with(message, kMinimal + ": tokens.train_steps")) << message;
}

TEST(Config, MissingOrBrokenFileNamesIt) {
  std::string missing = kDataDir + "/no_such_config.yaml";
  std::string message = error_of([&] { load_train_config(missing); });
  EXPECT_TRUE(starts_with(message, missing)) << message;

  message = error_of([] { parse("- just\n- a list\n"); });
  EXPECT_TRUE(starts_with(message, "test.yaml: ")) << message;
}

TEST(Config, RunNameExpandsDateAndJobId) {
  ::setenv("SLURM_JOB_ID", "4242", 1);
  ::unsetenv("TRIAX_RUN_DATE");
  TrainConfig c = parse_minimal_with({"general.run=exp_%date_%jobid"});
  EXPECT_TRUE(std::regex_match(c.general.run, std::regex("exp_[0-9]{8}_[0-9]{6}_4242"))) << c.general.run;
  EXPECT_EQ(c.checkpoints.checkpoints_path, "runs/" + c.general.run);

  ::unsetenv("SLURM_JOB_ID");
  c = parse_minimal_with({"general.run='%jobid-%jobid'"});
  EXPECT_EQ(c.general.run, "local-local");

  ::setenv("TRIAX_RUN_DATE", "20250101_000000", 1);
  c = parse_minimal_with({});
  EXPECT_EQ(c.general.run, "20250101_000000_local");  // default run: %date_%jobid
  EXPECT_EQ(c.resolved["general"]["run"].as<std::string>(), "20250101_000000_local");
  ::unsetenv("TRIAX_RUN_DATE");
}

TEST(Config, ValidateForWorld) {
  TrainConfig c = parse_minimal_with({"parallelism.dp=2", "parallelism.tp=2"});
  EXPECT_NO_THROW(validate_for_world(c, 4));
  std::string message = error_of([&] { validate_for_world(c, 2); });
  EXPECT_TRUE(starts_with(message, "test.yaml: parallelism.dp (2)")) << message;
  EXPECT_NE(message.find("world size is 2"), std::string::npos) << message;

  TrainConfig moe = parse_minimal_with({"parallelism.dp=4", "parallelism.expert_parallel_size=2"});
  EXPECT_NO_THROW(validate_for_world(moe, 4));
  TrainConfig bad_ep = parse_minimal_with({"parallelism.dp=4", "parallelism.expert_parallel_size=3"});
  message = error_of([&] { validate_for_world(bad_ep, 4); });
  EXPECT_NE(message.find("parallelism.expert_parallel_size (3) must divide parallelism.dp (4)"), std::string::npos)
      << message;
}

std::vector<std::string> yaml_files_in(const std::string& folder) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(folder))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// Every config shipped in configs/ loads (the model plugin reads model_config later).
TEST(ShippedConfigs, EveryConfigLoads) {
  std::vector<std::string> files = yaml_files_in(TRIAX_CONFIGS_DIR);
  ASSERT_FALSE(files.empty());
  for (const std::string& file : files) EXPECT_NO_THROW(load_train_config(file)) << file;
}

// The benchmark configs: what tools/device/bench.sh and docs/performance.md rely on.
TEST(ShippedConfigs, BenchmarkConfigsMatchTheBenchmarkSetup) {
  std::vector<std::string> files = yaml_files_in(std::string(TRIAX_CONFIGS_DIR) + "/bench");
  ASSERT_EQ(files.size(), 3u);
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    TrainConfig c = load_train_config(file);
    EXPECT_EQ(c.general.device, "cuda");
    EXPECT_EQ(c.parallelism.comm_backend, "nccl");
    EXPECT_EQ(c.parallelism.dp * c.parallelism.tp * c.parallelism.pp, 1);  // one GPU
    EXPECT_EQ(c.model.dtype, "bfloat16");
    EXPECT_EQ(c.model.model_config["vocab_size"].as<int>(), 49152);
    EXPECT_TRUE(c.model.model_config["tie_word_embeddings"].as<bool>());
    EXPECT_EQ(c.tokens.sequence_length, 2048);
    EXPECT_EQ(c.tokens.batch_accumulation_per_replica, 1);
    EXPECT_GE(c.tokens.train_steps, 20);  // warm-up steps are skipped, the median of the rest taken
    ASSERT_EQ(c.data_stages.size(), 1u);
    EXPECT_TRUE(c.data_stages[0].data.dataset.IsNull());   // synthetic tokens
    EXPECT_EQ(c.logging.iteration_step_info_interval, 1);  // one metrics line per step
    EXPECT_EQ(c.checkpoints.checkpoint_interval, 0);
    EXPECT_EQ(c.optimizer.plugin, "adamw");
    EXPECT_TRUE(c.optimizer.section["optimizer_factory"]["torch_adam_is_fused"].as<bool>());
    ASSERT_TRUE(c.optimizer.clip_grad.has_value());
    EXPECT_EQ(*c.optimizer.clip_grad, 1.0);
    const LrSchedulerConfig& lr = c.optimizer.learning_rate_scheduler;
    EXPECT_EQ(lr.min_decay_lr, lr.learning_rate) << "the peer's learning rate is constant";
  }
}

}  // namespace
}  // namespace triax
