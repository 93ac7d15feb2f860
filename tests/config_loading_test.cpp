// Loading configs: nanotron's tiny example loads, defaults are applied and recorded in resolved(),
// names and spellings are normalised, overrides apply in order.
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>

#include "config_test_support.hpp"

namespace triax {
namespace {

using namespace config_test;

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

  EXPECT_EQ(c.model.plugin, "");  // no model.plugin: chosen later from model_config's marker key
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

// nanotron's profiler section (its documented keys, as its ProfilerArgs names them) and
// general.benchmark_csv_path, which the example leaves null.
TEST(Config, NanotronProfilerSectionAndBenchmarkCsvLoad) {
  TrainConfig c = load_train_config(
      kTiny, {"profiler={profiler_export_path: ./tb_logs, wait: 2, warmup: 1, active: 3, repeat: 2, skip_first: 4, "
              "record_shapes: true, profile_memory: true, with_stack: false, export_chrome_trace: true}",
              "general.benchmark_csv_path=bench.csv"});
  ASSERT_TRUE(c.profiler.has_value());
  EXPECT_EQ(c.profiler->options.export_path, "./tb_logs");
  EXPECT_EQ(c.profiler->options.wait, 2);
  EXPECT_EQ(c.profiler->options.warmup, 1);
  EXPECT_EQ(c.profiler->options.active, 3);
  EXPECT_EQ(c.profiler->options.repeat, 2);
  EXPECT_EQ(c.profiler->options.skip_first, 4);
  EXPECT_TRUE(c.profiler->options.record_shapes);
  EXPECT_TRUE(c.profiler->options.profile_memory);
  EXPECT_FALSE(c.profiler->options.with_stack);
  EXPECT_EQ(c.general.benchmark_csv_path.value_or(""), "bench.csv");
  // nanotron's defaults for the keys left out.
  TrainConfig d = load_train_config(kTiny, {"profiler={profiler_export_path: tb}"});
  ASSERT_TRUE(d.profiler.has_value());
  EXPECT_EQ(d.profiler->options.wait, 1);
  EXPECT_EQ(d.profiler->options.warmup, 1);
  EXPECT_EQ(d.profiler->options.active, 1);
  EXPECT_EQ(d.profiler->options.repeat, 1);
  EXPECT_EQ(d.profiler->options.skip_first, 3);
  EXPECT_FALSE(d.profiler->options.record_shapes);
  EXPECT_TRUE(d.profiler->options.with_stack);
  EXPECT_EQ(d.resolved["profiler"]["skip_first"].as<int>(), 3);
  EXPECT_FALSE(load_train_config(kTiny).profiler.has_value());
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
  EXPECT_EQ(c.model.plugin, "");  // no model.plugin: chosen later from model_config's marker key
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
  EXPECT_TRUE(r["model"]["plugin"].IsNull());
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

// data.source is triax's: nanotron configs name none and get the source their dataset implies,
// shown in the resolved config; a named source is kept as given (checked when the data opens).
TEST(Config, DataStageSourcesDefaultFromTheirDataset) {
  TrainConfig defaulted = parse_minimal_with({});
  EXPECT_EQ(defaulted.data_stages[0].data.source, "synthetic");
  EXPECT_EQ(defaulted.resolved["data_stages"][0]["data"]["source"].as<std::string>(), "synthetic");

  TrainConfig c = parse(std::string(kMinimalText) + R"(
data_stages:
- {name: stable, start_training_step: 1, data: {dataset: null}}
- {name: folders, start_training_step: 5, data: {dataset: {dataset_folder: a}}}
- {name: named, start_training_step: 9, data: {source: my_stream, dataset: null}}
)");
  ASSERT_EQ(c.data_stages.size(), 3u);
  EXPECT_EQ(c.data_stages[0].data.source, "synthetic");
  EXPECT_EQ(c.data_stages[1].data.source, "token_folders");
  EXPECT_EQ(c.data_stages[2].data.source, "my_stream");
  EXPECT_EQ(c.resolved["data_stages"][1]["data"]["source"].as<std::string>(), "token_folders");
  EXPECT_EQ(c.resolved["data_stages"][2]["data"]["source"].as<std::string>(), "my_stream");
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

// Without model.plugin the plugin is chosen later, from model_config's marker key.
TEST(Config, ModelPluginMayBeLeftOut) {
  TrainConfig c = parse_minimal_with({});
  EXPECT_EQ(c.model.plugin, "");
  EXPECT_TRUE(c.resolved["model"]["plugin"].IsNull());
  EXPECT_EQ(parse_minimal_with({"model.plugin=custom"}).model.plugin, "custom");
  std::string message = minimal_error({"model.plugin=''"});
  EXPECT_TRUE(starts_with(message, "test.yaml: model.plugin")) << message;
  EXPECT_NE(message.find("must not be empty"), std::string::npos) << message;
}

// A model started from a Hugging Face folder takes its hyper-parameters from the folder's config.json.
TEST(Config, ModelConfigMayComeFromInitMethodPath) {
  YAML::Node root = YAML::Load(kMinimalText);
  root["model"].remove("model_config");
  root["model"]["init_method"] = YAML::Load("{path: some/hf_folder}");
  TrainConfig c = parse_train_config(root, "test.yaml");
  EXPECT_TRUE(c.model.model_config.IsNull());
  EXPECT_EQ(c.model.init_method["path"].as<std::string>(), "some/hf_folder");
  EXPECT_TRUE(c.resolved["model"]["model_config"].IsNull());

  root["model"]["init_method"] = YAML::Load("{std: 0.02}");
  std::string message = error_of([&] { parse_train_config(root, "test.yaml"); });
  EXPECT_TRUE(starts_with(message, "test.yaml: model.model_config: required key is missing")) << message;
  EXPECT_NE(message.find("init_method.path"), std::string::npos) << message;
}

}  // namespace
}  // namespace triax
