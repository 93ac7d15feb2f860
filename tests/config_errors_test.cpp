// Mistakes in a config stop the run with the file, the key's path, the line and what was expected.
#include <gtest/gtest.h>

#include "config_test_support.hpp"

namespace triax {
namespace {

using namespace config_test;

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
      {{"optimizer.zero_stage=2"}, "optimizer.zero_stage", "ZeRO stages 0, 1 and 3"},
      {{"optimizer.zero_stage=4"}, "optimizer.zero_stage", "ZeRO stages 0, 1 and 3"},
      {{"model.dtype=int8"}, "model.dtype", "float32, bfloat16, float16, float64"},
      {{"model.make_vocab_size_divisible_by=0"}, "model.make_vocab_size_divisible_by", "at least 1"},
      {{"parallelism.tp_mode=SPLIT"}, "parallelism.tp_mode", "ALL_REDUCE, REDUCE_SCATTER"},
      {{"parallelism.comm_backend=gloo"}, "parallelism.comm_backend", "auto, mpi, nccl"},
      {{"parallelism.recompute_num_layers=2"}, "parallelism.recompute_num_layers", "needs parallelism.recompute_layer"},
      {{"parallelism.recompute_layer=true", "parallelism.recompute_num_layers=0"},
       "parallelism.recompute_num_layers",
       "at least 1"},
      {{"parallelism.context_parallel_size=3"}, "parallelism.context_parallel_size", "into 2 x 3 equal chunks"},
      {{"parallelism.context_parallel_size=0"}, "parallelism.context_parallel_size", "at least 1"},
      {{"general.cuda_graphs=true", "parallelism.context_parallel_size=2"}, "general.cuda_graphs", "the cp group"},
      {{"general.device=tpu"}, "general.device", "auto, cpu, cuda"},
      {{"general.cuda_graphs=true", "general.device=cpu"}, "general.cuda_graphs", "need a CUDA device"},
      {{"general.cuda_graphs=true", "parallelism.tp=2"}, "general.cuda_graphs", "parallelism.tp = 1"},
      {{"general.cuda_graphs=true", "parallelism.pp=2"}, "general.cuda_graphs", "pipeline sends"},
      {{"general.cuda_graphs=true", "optimizer.zero_stage=3"},
       "general.cuda_graphs",
       "not with optimizer.zero_stage 3"},
      {{"general.cuda_graphs=true", "parallelism.pp_pass_record=true"},
       "general.cuda_graphs",
       "not with parallelism.pp_pass_record"},
      {{"parallelism.pp_pass_record=often"}, "parallelism.pp_pass_record", "true or false"},
      {{"general.cuda_graphs=yes please"}, "general.cuda_graphs", "true or false"},
      {{"logging.log_level=verbose"}, "logging.log_level", "passive"},
      {{"logging.peak_tflops=0"}, "logging.peak_tflops", "> 0"},
      {{"profiler={wait: 1}"}, "profiler.profiler_export_path", "missing"},
      {{"profiler={profiler_export_path: tb, active: 0}"}, "profiler.active", "at least 1"},
      {{"profiler={profiler_export_path: tb, trace_memory: true}"}, "profiler.trace_memory", "unknown"},
      {{"logging.tensorboard_dir=''"}, "logging.tensorboard_dir", "must not be empty"},
      {{"logging.progress=sometimes"}, "logging.progress", "auto, always, never"},
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

TEST(Config, MisspeltRequiredSectionIsReportedAsUnknown) {
  std::string message = error_of([] {
    parse(R"(
model: {model_config: {a: 1}, init_method: {std: 0.02}}
tokenz: {sequence_length: 32, train_steps: 10, micro_batch_size: 2, batch_accumulation_per_replica: 1}
optimizer: {learning_rate_scheduler: {learning_rate: 0.001}}
)");
  });
  EXPECT_TRUE(starts_with(message, "test.yaml: tokenz (line 3): unknown key (did you mean tokens?")) << message;

  // Keys that differ by more than a slip are not taken for each other.
  message = minimal_error({"tokens.micro_batch=2", "tokens.micro_batch_size=null"});
  EXPECT_TRUE(starts_with(message, "test.yaml: tokens.micro_batch_size: required key is missing")) << message;
}

}  // namespace
}  // namespace triax
