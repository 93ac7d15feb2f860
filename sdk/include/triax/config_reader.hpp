// Strict reading of YAML configuration, shared by the core and by plugins.
//
// A ConfigReader wraps one YAML mapping and its key path ("optimizer.learning_rate_scheduler").
// Every key must be read before finish(); a leftover key is reported as unknown, with the keys
// that are known. A value of the wrong type or outside its allowed set is reported with the
// key's full path and what was expected. Every value read, defaults included, is recorded into
// resolved(): the configuration exactly as the run used it.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace triax {

class ConfigReader {
 public:
  // `path` is the key path of `node` ("" for the document root); `origin` names the file the
  // YAML came from, for messages ("" when unknown).
  ConfigReader(YAML::Node node, std::string path, std::string origin = "");

  // Parses YAML text; errors name `origin`.
  static ConfigReader from_text(const std::string& text, const std::string& path, const std::string& origin = "");

  bool contains(const std::string& key) const;  // present and not null

  template <class T>
  T required(const std::string& key);
  template <class T>
  T get(const std::string& key, const T& fallback);  // absent or null gives fallback
  template <class T>
  std::optional<T> optional(const std::string& key);  // absent or null gives nullopt

  // A string from a fixed set of choices.
  std::string choice(const std::string& key, std::initializer_list<const char*> choices,
                     const std::optional<std::string>& fallback = std::nullopt);

  ConfigReader section(const std::string& key);                          // required mapping
  std::optional<ConfigReader> optional_section(const std::string& key);  // absent/null: nullopt
  std::vector<ConfigReader> section_list(const std::string& key);        // required list of mappings
  // The subtree, unparsed (another component reads it strictly); recorded as is.
  YAML::Node raw(const std::string& key);
  // Marks a key as known without reading it (accepted for compatibility, unused).
  void ignore(const std::string& key);

  // Throws ConfigError for every key that no call above consumed.
  void finish() const;

  // Throws ConfigError for `key` with an explanation.
  [[noreturn]] void fail(const std::string& key, const std::string& what) const;

  const std::string& path() const { return path_; }
  std::string key_path(const std::string& key) const;
  const std::string& origin() const { return origin_; }
  // What was read so far, defaults included. Shared with the parent reader's tree.
  YAML::Node resolved() const { return resolved_; }

 private:
  YAML::Node lookup(const std::string& key);
  std::string origin_prefix() const;
  std::string where(const YAML::Node& node) const;

  YAML::Node node_;
  std::string path_;
  std::string origin_;
  YAML::Node resolved_;
  std::shared_ptr<std::vector<std::string>> consumed_;
};

// Reads a YAML file; a missing file or a syntax error is a ConfigError naming the file.
YAML::Node load_yaml_file(const std::string& file);

// Applies one "--set a.b.c=value" override: value is parsed as YAML (numbers, lists, null);
// numeric path parts index into lists ("data_stages.0.data.seed=7").
void apply_override(YAML::Node& root, const std::string& assignment);

// Emits YAML with block style, for files people read.
std::string to_yaml_text(const YAML::Node& node);

}  // namespace triax
