// Fuzzed configs: from a fixed seed, 300 mutations of every shipped config (configs/**.yaml) —
// deleted keys, wrong types, out-of-range and huge numbers, unicode, YAML syntax errors,
// duplicate keys, anchors and aliases, deep nesting — each loaded and checked as
// `triax train --check` does (the config, the plugins it names, the sections they read). A
// mutation is either accepted or refused with a ConfigError (exit 2) that starts with the file and
// names the key or the line; an unknown plugin name is a PluginError (exit 3) naming the key.
// Anything else (another exception, a signal, a hang) fails the test.
//
// Built twice: with the plugins (TRIAX_FUZZ_WITH_PLUGINS, config_fuzz_test), and as the loader
// alone (config_fuzz_loader_test), which tools/sanitize.sh builds under AddressSanitizer and
// UndefinedBehaviorSanitizer without LibTorch.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>

#include "config_mutations.hpp"
#include "triax/config_reader.hpp"
#include "triax/config/train_config.hpp"
#include "triax/error.hpp"
#ifdef TRIAX_FUZZ_WITH_PLUGINS
#include "test_plugin_registry.hpp"
#include "run_check.hpp"
#endif

namespace triax {
namespace {

namespace fs = std::filesystem;
constexpr int kMutationsPerConfig = 300;
constexpr uint32_t kSeed = 20261201;

std::vector<std::string> shipped_configs() {
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(TRIAX_CONFIGS_DIR))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

std::string read_text(const std::string& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct Outcome {
  bool accepted = false;
  std::string error;  // the message when refused
  bool plugin_error = false;
};

Outcome load_and_check(const std::string& file) {
  Outcome outcome;
  try {
    TrainConfig config = load_train_config(file);
#ifdef TRIAX_FUZZ_WITH_PLUGINS
    check_run(config, testing::test_plugin_registry());
#endif
    outcome.accepted = true;
  } catch (const ConfigError& e) {
    outcome.error = e.what();
  }
#ifdef TRIAX_FUZZ_WITH_PLUGINS
  catch (const PluginError& e) {
    outcome.error = e.what();
    outcome.plugin_error = true;
  }
#endif
  // Any other exception escapes and fails the test with its message.
  return outcome;
}

class ConfigFuzz : public ::testing::TestWithParam<std::string> {};

TEST_P(ConfigFuzz, EveryMutationIsAcceptedOrRefusedWithTheKeyOrLine) {
  const std::string original_file = GetParam();
  const std::string text = read_text(original_file);
  ASSERT_TRUE(load_and_check(original_file).accepted) << original_file << " itself must pass";

  const fs::path folder = fs::temp_directory_path() / ("triax_config_fuzz_" + std::to_string(::getpid()));
  fs::create_directories(folder);
  const std::string file = (folder / fs::path(original_file).filename()).string();
  // One stream per config, the same on every machine: the seed plus the file name's bytes.
  uint32_t seed = kSeed;
  for (unsigned char c : fs::path(original_file).filename().string()) seed = seed * 31 + c;
  std::mt19937 random(seed);

  std::map<std::string, int> accepted, refused;
  for (int i = 0; i < kMutationsPerConfig; ++i) {
    const config_fuzz::Mutation mutation = config_fuzz::mutate(text, random);
    {
      std::ofstream out(file);
      out << mutation.text;
    }
    SCOPED_TRACE("mutation " + std::to_string(i) + ": " + mutation.description);
    const Outcome outcome = load_and_check(file);
    if (outcome.accepted) {
      ++accepted[mutation.kind];
      // The loader alone does not read the plugins' sections, and --check leaves
      // model.init_method to the model plugin, which reads it when it builds the model.
      const bool read_by_check = mutation.description.find("model.init_method") == std::string::npos;
#ifdef TRIAX_FUZZ_WITH_PLUGINS
      if (read_by_check) {
        EXPECT_FALSE(mutation.must_fail) << "accepted";
      }
#else
      (void)read_by_check;
#endif
      continue;
    }
    ++refused[mutation.kind];
    EXPECT_EQ(outcome.error.rfind(file + ": ", 0), 0u) << "the message must start with the file: " << outcome.error;
    // The mutated key, or a line; a mutation of no one key (a syntax error, a truncated file)
    // may instead name the key path it left wrong ("tokens.train_steps: required key ...").
    static const std::regex key_path(R"(^[A-Za-z_][A-Za-z0-9_.]*( \(line [0-9]+\))?: )");
    const std::string after_file = outcome.error.substr(std::min(outcome.error.size(), file.size() + 2));
    const bool names_key = mutation.key.empty() ? std::regex_search(after_file, key_path)
                                                : outcome.error.find(mutation.key) != std::string::npos;
    const bool names_line = outcome.error.find("line ") != std::string::npos;
    EXPECT_TRUE(names_key || names_line) << "the message names neither '" << mutation.key
                                         << "' (or another key path) nor a line: " << outcome.error;
    if (outcome.plugin_error) {
      EXPECT_NE(outcome.error.find("plugin"), std::string::npos) << "a plugin error must be about a plugin";
    }
  }
  fs::remove_all(folder);

  std::ostringstream summary;
  for (const auto& [kind, count] : refused) summary << " " << kind << ": " << count << " refused";
  for (const auto& [kind, count] : accepted) summary << " " << kind << ": " << count << " accepted";
  std::cout << fs::path(original_file).filename().string() << ":" << summary.str() << "\n";
}

INSTANTIATE_TEST_SUITE_P(ShippedConfigs, ConfigFuzz, ::testing::ValuesIn(shipped_configs()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = fs::path(info.param).stem().string();
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

}  // namespace
}  // namespace triax
