// Faults of the config file itself, as a new user makes them: duplicate keys, a second document,
// an unclosed quote, alias loops and bombs, deep nesting, huge sizes; and the located YAML that
// carries the file's lines into a plugin's section.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "config_test_support.hpp"
#include "triax/located_yaml.hpp"

namespace triax {
namespace {

using namespace config_test;

// Writes `text` to a file of the test's own and returns the error of loading it.
std::string file_error(const std::string& name, const std::string& text) {
  const std::string file = (std::filesystem::temp_directory_path() / name).string();
  {
    std::ofstream out(file);
    out << text;
  }
  std::string message = error_of([&] { load_train_config(file); });
  std::filesystem::remove(file);
  EXPECT_TRUE(starts_with(message, file + ": ")) << message;
  return message;
}

std::string minimal_plus(const std::string& extra) { return std::string(kMinimalText) + extra; }

TEST(ConfigFile, DuplicateKeyNamesBothLinesAndThePath) {
  const std::string text =
      "model:\n  model_config:\n    hidden_size: 64\n    hidden_size: 7\n  init_method: {std: 0.02}\n";
  std::string message = file_error("triax_dup.yaml", text);
  EXPECT_NE(message.find("model.model_config.hidden_size (line 4): duplicate key (first given (line 3))"),
            std::string::npos)
      << message;
  // In flow style and at the top level too.
  message = file_error("triax_dup_flow.yaml", minimal_plus("general: {seed: 1, seed: 2}\n"));
  EXPECT_NE(message.find("general.seed (line 13): duplicate key"), std::string::npos) << message;
  message = file_error("triax_dup_top.yaml", minimal_plus("tokens: {}\n"));
  EXPECT_NE(message.find("tokens (line 13): duplicate key (first given (line 5))"), std::string::npos) << message;
}

TEST(ConfigFile, SecondDocumentIsAnError) {
  std::string message = file_error("triax_two_docs.yaml", minimal_plus("---\ngeneral: {seed: 3}\n"));
  EXPECT_NE(message.find("line 13: a second YAML document"), std::string::npos) << message;
}

TEST(ConfigFile, UnclosedQuoteIsASyntaxErrorWithItsLine) {
  std::string text = minimal_plus("general:\n  project: \"demo\n  seed: 3\n");
  std::string message = file_error("triax_quote.yaml", text);
  EXPECT_NE(message.find("general.project (line 14): not valid YAML: the quoted string starting at line 14"),
            std::string::npos)
      << message;
  message = file_error("triax_quote_single.yaml", "general:\n  project: 'demo\n" + std::string(kMinimalText));
  EXPECT_NE(message.find("(line 2): not valid YAML"), std::string::npos) << message;
  EXPECT_EQ(message.find("required section is missing"), std::string::npos) << message;
  // Quotes that close, with escapes and doubled single quotes, are fine.
  EXPECT_NO_THROW(parse_train_config(YAML::Load(minimal_plus("general: {project: \"a \\\" b\", run: 'it''s'}\n")),
                                     "test.yaml"));
}

TEST(ConfigFile, SyntaxErrorNamesLineAndColumn) {
  std::string message = file_error("triax_syntax.yaml", minimal_plus("general: {seed: 1\n"));
  EXPECT_NE(message.find("not valid YAML"), std::string::npos) << message;
  EXPECT_NE(message.find("line "), std::string::npos) << message;
}

TEST(ConfigFile, AliasLoopsBombsAndDeepNestingAreRefused) {
  std::string message = file_error("triax_loop.yaml", minimal_plus("general: &g {seed: *g}\n"));
  EXPECT_NE(message.find("general.seed (line 13): an alias refers to a node that contains it"), std::string::npos)
      << message;

  std::string bomb = "lol:\n  l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int level = 1; level < 9; ++level) {
    bomb += "  l" + std::to_string(level) + ": &l" + std::to_string(level) + " [";
    for (int i = 0; i < 10; ++i) bomb += (i ? ", *l" : "*l") + std::to_string(level - 1);
    bomb += "]\n";
  }
  message = file_error("triax_bomb.yaml", minimal_plus(bomb));
  EXPECT_NE(message.find("more than 100000 values"), std::string::npos) << message;

  message = file_error("triax_deep.yaml", minimal_plus("general: {seed: " + std::string(100, '[') +
                                                       std::string(100, ']') + "}\n"));
  EXPECT_NE(message.find("nested deeper than 64 levels"), std::string::npos) << message;

  // An alias to a value of the right type is fine.
  TrainConfig c = parse(minimal_plus("general: {seed: &s 7}\ndata_stages: [{name: a, start_training_step: 1, "
                                     "data: {seed: *s}}]\n"));
  EXPECT_EQ(c.data_stages[0].data.seed, 7);
}

TEST(ConfigFile, HugeSizesNameTheKey) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"tokens.sequence_length=99999999999", "tokens.sequence_length"},
      {"tokens.micro_batch_size=4611686018427387904", "tokens.micro_batch_size"},
      {"parallelism.dp=1099511627776", "parallelism.dp"},
      {"model.ddp_bucket_cap_mb=9223372036854775807", "model.ddp_bucket_cap_mb"},
      {"parallelism.comm_timeout_seconds=1.0e300", "parallelism.comm_timeout_seconds"},
      {"tokens.train_steps=99999999999999999999", "tokens.train_steps"},
  };
  for (const auto& [set, key] : cases) {
    std::string message = minimal_error({set});
    EXPECT_TRUE(starts_with(message, "test.yaml: " + key)) << set << " -> " << message;
  }
  // Each dimension fits, but together the step's token ids would not fit in memory.
  std::string message = minimal_error({"tokens.sequence_length=16777216", "tokens.micro_batch_size=16777216"});
  EXPECT_TRUE(starts_with(message, "test.yaml: tokens.micro_batch_size")) << message;
  EXPECT_NE(message.find("do not fit in this machine's"), std::string::npos) << message;
  message = minimal_error({"parallelism.dp=65536", "parallelism.tp=65536"});
  EXPECT_TRUE(starts_with(message, "test.yaml: parallelism.dp")) << message;
}

TEST(ConfigFile, WarmupLongerThanTheRunIsAcceptedAsInNanotron) {
  TrainConfig c = parse_minimal_with({"optimizer.learning_rate_scheduler.lr_warmup_steps=50"});
  EXPECT_EQ(c.optimizer.learning_rate_scheduler.lr_warmup_steps, 50);
  EXPECT_EQ(c.optimizer.learning_rate_scheduler.lr_decay_steps, 0);
}

TEST(ConfigFile, PluginSectionsKeepTheFileAndItsLines) {
  const std::string file = (std::filesystem::temp_directory_path() / "triax_located.yaml").string();
  {
    std::ofstream out(file);
    out << kMinimalText << "  optimizer_factory:\n    name: adamW\n    adam_beta1: 0.9\n";
  }
  TrainConfig c = load_train_config(file);
  std::filesystem::remove(file);
  // What the host hands a plugin: read back, a key names the file and its line there.
  ConfigReader model = ConfigReader::from_text(to_located_yaml_text(c.model.model_config, c.origin),
                                               "model.model_config");
  try {
    model.fail("hidden_size", "too small");
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), file + ": model.model_config.hidden_size (line 3): too small");
  }
  ConfigReader optimizer = ConfigReader::from_text(to_located_yaml_text(c.optimizer.section, c.origin), "optimizer");
  ConfigReader factory = optimizer.section("optimizer_factory");
  try {
    factory.fail("adam_beta1", "out of range");
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), file + ": optimizer.optimizer_factory.adam_beta1 (line 15): out of range");
  }
  // A value the loader filled in (a default) has no line of the file.
  try {
    optimizer.fail("zero_stage", "bad");
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), file + ": optimizer.zero_stage: bad");
  }
  // A node read from the text (as the SDK hands plugins their context) names the file too.
  try {
    ConfigReader(YAML::Load(to_located_yaml_text(c.model.init_method, c.origin)), "model.init_method")
        .fail("std", "bad");
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), file + ": model.init_method.std (line 4): bad");
  }
  // Text without the tag reads as before, with no file.
  try {
    ConfigReader::from_text("a: 1\n", "x").fail("a", "bad");
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "x.a: bad");
  }
}

}  // namespace
}  // namespace triax
