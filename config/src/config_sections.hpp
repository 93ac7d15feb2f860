// The readers of the training configuration's sections, one per section, and the value checks
// they share. Each reader takes the parent's ConfigReader, reads its section once (every key named
// where it is read, its default recorded into resolved()), and finishes it, so an unknown key is
// reported with the section's known keys. Checks across keys come after finish().
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "triax/config_reader.hpp"
#include "triax/config/train_config.hpp"

namespace triax::config {

// ---- sections, in the order the document is read (resolved() keeps this order) -----------------

GeneralConfig read_general(ConfigReader& root);
CheckpointsConfig read_checkpoints(ConfigReader& root, const std::string& run);
ParallelismConfig read_parallelism(ConfigReader& root);
ModelSection read_model(ConfigReader& root);
TokenizerConfig read_tokenizer(ConfigReader& root);
TokensConfig read_tokens(ConfigReader& root, const ParallelismConfig& parallelism);
OptimizerConfig read_optimizer(ConfigReader& root, const TokensConfig& tokens);
std::vector<DataStageConfig> read_data_stages(ConfigReader& root, const GeneralConfig& general,
                                              const TokensConfig& tokens);
LoggingConfig read_logging(ConfigReader& root);
std::optional<ProfilerConfig> read_profiler(ConfigReader& root);
std::optional<std::string> read_fp8(ConfigReader& root);  // the section as YAML text, defaults filled in
PluginsConfig read_plugins(ConfigReader& root);

// ---- shared checks -----------------------------------------------------------------------------

// A section that may be absent: absent or null reads as an empty mapping, so that every key gets
// its default and the defaults are recorded under the section's name in resolved().
ConfigReader section_or_empty(ConfigReader& parent, const std::string& key);

// Integers with bounds; the message names the key and the bound. The default upper bound keeps
// sums and products of a few counts far from overflowing.
constexpr int64_t kMaxCount = int64_t{1} << 40;
int64_t required_int(ConfigReader& r, const std::string& key, int64_t min, int64_t max = kMaxCount);
int64_t int_or(ConfigReader& r, const std::string& key, int64_t fallback, int64_t min, int64_t max = kMaxCount);
std::optional<int64_t> optional_int(ConfigReader& r, const std::string& key, int64_t min, int64_t max = kMaxCount);

// A string that, when given, must not be empty.
std::string nonempty_string_or(ConfigReader& r, const std::string& key, const std::string& fallback);

// A mapping handed on as YAML (to a plugin, or read later), or nullopt when absent or null;
// `what` says what belongs in it. The document's own node, not a copy: it keeps the file's lines
// for the plugin's messages (to_located_yaml_text). Never assign into it (yaml-cpp would change
// the document); copy with YAML::Clone to edit.
std::optional<YAML::Node> optional_mapping(ConfigReader& r, const std::string& key, const std::string& what);

// A number as people write it ("0.001", not "0.00100000").
std::string number(double value);

}  // namespace triax::config
