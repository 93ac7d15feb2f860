#include "triax/config_reader.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "triax/error.hpp"
#include "triax/located_yaml.hpp"
#include "yaml_text.hpp"

namespace triax {
namespace {

std::string describe_node(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Scalar:
      return "'" + node.Scalar() + "'";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    default:
      return "nothing";
  }
}

template <class T>
struct TypeName;
template <>
struct TypeName<int64_t> {
  static constexpr const char* value = "an integer";
};
template <>
struct TypeName<int32_t> {
  static constexpr const char* value = "an integer";
};
template <>
struct TypeName<double> {
  static constexpr const char* value = "a number";
};
template <>
struct TypeName<bool> {
  static constexpr const char* value = "true or false";
};
template <>
struct TypeName<std::string> {
  static constexpr const char* value = "a string";
};
template <>
struct TypeName<std::vector<std::string>> {
  static constexpr const char* value = "a list of strings";
};
template <>
struct TypeName<std::vector<double>> {
  static constexpr const char* value = "a list of numbers";
};
template <>
struct TypeName<std::vector<int64_t>> {
  static constexpr const char* value = "a list of integers";
};

// Converts a scalar strictly: "1.5" is not an integer, "yes" is not a bool we accept.
template <class T>
bool convert(const YAML::Node& node, T& out);

template <>
bool convert(const YAML::Node& node, std::string& out) {
  if (!node.IsScalar()) return false;
  out = node.Scalar();
  return true;
}
template <>
bool convert(const YAML::Node& node, bool& out) {
  if (!node.IsScalar()) return false;
  const std::string& s = node.Scalar();
  if (s == "true" || s == "True" || s == "TRUE") {
    out = true;
    return true;
  }
  if (s == "false" || s == "False" || s == "FALSE") {
    out = false;
    return true;
  }
  return false;
}
template <>
bool convert(const YAML::Node& node, int64_t& out) {
  if (!node.IsScalar()) return false;
  const std::string& s = node.Scalar();
  if (s.empty()) return false;
  size_t used = 0;
  try {
    out = std::stoll(s, &used, 10);
  } catch (const std::exception&) {
    return false;
  }
  return used == s.size();
}
template <>
bool convert(const YAML::Node& node, int32_t& out) {
  int64_t wide = 0;
  if (!convert(node, wide) || wide < INT32_MIN || wide > INT32_MAX) return false;
  out = static_cast<int32_t>(wide);
  return true;
}
template <>
bool convert(const YAML::Node& node, double& out) {
  if (!node.IsScalar()) return false;
  const std::string& s = node.Scalar();
  if (s.empty()) return false;
  size_t used = 0;
  try {
    out = std::stod(s, &used);
  } catch (const std::exception&) {
    return false;
  }
  return used == s.size() && std::isfinite(out);
}
template <class E>
bool convert_list(const YAML::Node& node, std::vector<E>& out) {
  if (!node.IsSequence()) return false;
  out.clear();
  for (const auto& item : node) {
    E value{};
    if (!convert(item, value)) return false;
    out.push_back(value);
  }
  return true;
}
template <>
bool convert(const YAML::Node& node, std::vector<std::string>& out) {
  return convert_list(node, out);
}
template <>
bool convert(const YAML::Node& node, std::vector<double>& out) {
  return convert_list(node, out);
}
template <>
bool convert(const YAML::Node& node, std::vector<int64_t>& out) {
  return convert_list(node, out);
}

template <class T>
YAML::Node to_node(const T& value) {
  return YAML::Node(value);
}

// Edits (insert, delete, replace) between two keys, ignoring case.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      const size_t next = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = row[j];
      row[j] = next;
    }
  }
  return row[b.size()];
}

// A typing slip rather than another key: a short key must match closely.
bool looks_like_misspelling(const std::string& present, const std::string& wanted) {
  const size_t allowed = std::min<size_t>(2, std::max(present.size(), wanted.size()) / 4);
  return edit_distance(present, wanted) <= allowed;
}

// " (line N)" for a node of a named file.
std::string line_of(const std::string& origin, const YAML::Node& node) {
  if (origin.empty() || !node.IsDefined() || node.Mark().line < 0 || located_unplaced(node)) return "";
  return " (line " + std::to_string(node.Mark().line + 1) + ")";
}

// A required key is missing: when an unread key of nearly its name is present, that key is the
// mistake, and the message names it where it is (a misspelling, not an omission).
void throw_if_misspelt(const YAML::Node& node, const std::vector<std::string>& consumed, const ConfigReader& reader,
                       const std::string& key, const std::string& expected) {
  for (const auto& entry : node) {
    const std::string present = entry.first.as<std::string>();
    const bool unread = std::find(consumed.begin(), consumed.end(), present) == consumed.end();
    if (unread && looks_like_misspelling(present, key))
      throw ConfigError((reader.origin().empty() ? "" : reader.origin() + ": ") + reader.key_path(present) +
                        line_of(reader.origin(), entry.second) + ": unknown key (did you mean " + key +
                        "? it is required and missing; expected " + expected + ")");
  }
}

}  // namespace

ConfigReader::ConfigReader(YAML::Node node, std::string path, std::string origin)
    : node_(std::move(node)),
      path_(std::move(path)),
      origin_(std::move(origin)),
      resolved_(YAML::NodeType::Map),
      consumed_(std::make_shared<std::vector<std::string>>()) {
  // A section the host re-emitted for a plugin names its file (to_located_yaml_text).
  if (origin_.empty() && node_.IsDefined()) origin_ = located_origin(node_);
  if (node_.IsNull() || !node_.IsDefined()) node_ = YAML::Node(YAML::NodeType::Map);
  if (!node_.IsMap()) {
    std::string shown = path_.empty() ? "the document" : path_;
    throw ConfigError(origin_prefix() + shown + ": expected a mapping of keys, got " + describe_node(node_));
  }
}

std::string ConfigReader::origin_prefix() const { return origin_.empty() ? "" : origin_ + ": "; }

ConfigReader ConfigReader::from_text(const std::string& text, const std::string& path, const std::string& origin) {
  // Syntax errors name the file the text says it came from, if any (a plugin passes no origin).
  const std::string file = origin.empty() ? located_origin(text) : origin;
  return ConfigReader(yaml_text::load_checked(text, file.empty() ? "YAML" : file), path, origin);
}

std::string ConfigReader::key_path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

std::string ConfigReader::where(const YAML::Node& node) const { return line_of(origin_, node); }

void ConfigReader::fail(const std::string& key, const std::string& what) const {
  YAML::Node node = node_[key];
  throw ConfigError(origin_prefix() + key_path(key) + where(node) + ": " + what);
}

YAML::Node ConfigReader::lookup(const std::string& key) {
  if (std::find(consumed_->begin(), consumed_->end(), key) == consumed_->end()) consumed_->push_back(key);
  const YAML::Node& constant = node_;
  return constant[key];
}

bool ConfigReader::contains(const std::string& key) const {
  const YAML::Node& constant = node_;
  YAML::Node value = constant[key];
  return value.IsDefined() && !value.IsNull();
}

template <class T>
std::optional<T> ConfigReader::optional(const std::string& key) {
  YAML::Node value = lookup(key);
  if (!value.IsDefined() || value.IsNull()) {
    resolved_[key] = YAML::Node(YAML::NodeType::Null);
    return std::nullopt;
  }
  T out{};
  if (!convert(value, out)) fail(key, std::string("expected ") + TypeName<T>::value + ", got " + describe_node(value));
  resolved_[key] = to_node(out);
  return out;
}

template <class T>
T ConfigReader::required(const std::string& key) {
  if (!contains(key)) {
    lookup(key);
    throw_if_misspelt(node_, *consumed_, *this, key, TypeName<T>::value);
    fail(key, std::string("required key is missing (expected ") + TypeName<T>::value + ")");
  }
  return *optional<T>(key);
}

template <class T>
T ConfigReader::get(const std::string& key, const T& fallback) {
  std::optional<T> value = optional<T>(key);
  if (!value) {
    resolved_[key] = to_node(fallback);
    return fallback;
  }
  return *value;
}

#define TRIAX_INSTANTIATE(T)                                               \
  template std::optional<T> ConfigReader::optional<T>(const std::string&); \
  template T ConfigReader::required<T>(const std::string&);                \
  template T ConfigReader::get<T>(const std::string&, const T&);
TRIAX_INSTANTIATE(int64_t)
TRIAX_INSTANTIATE(int32_t)
TRIAX_INSTANTIATE(double)
TRIAX_INSTANTIATE(bool)
TRIAX_INSTANTIATE(std::string)
TRIAX_INSTANTIATE(std::vector<std::string>)
TRIAX_INSTANTIATE(std::vector<double>)
TRIAX_INSTANTIATE(std::vector<int64_t>)
#undef TRIAX_INSTANTIATE

std::string ConfigReader::choice(const std::string& key, std::initializer_list<const char*> choices,
                                 const std::optional<std::string>& fallback) {
  std::optional<std::string> value = optional<std::string>(key);
  if (!value) {
    if (!fallback) {
      std::string listed;
      for (const char* c : choices) listed += std::string(listed.empty() ? "" : ", ") + c;
      throw_if_misspelt(node_, *consumed_, *this, key, "one of: " + listed);
      fail(key, "required key is missing (expected one of: " + listed + ")");
    }
    resolved_[key] = *fallback;
    return *fallback;
  }
  for (const char* c : choices)
    if (*value == c) return *value;
  std::string listed;
  for (const char* c : choices) listed += std::string(listed.empty() ? "" : ", ") + c;
  fail(key, "expected one of: " + listed + "; got '" + *value + "'");
}

ConfigReader ConfigReader::section(const std::string& key) {
  std::optional<ConfigReader> child = optional_section(key);
  if (!child) {
    throw_if_misspelt(node_, *consumed_, *this, key, "a mapping");
    fail(key, "required section is missing (expected a mapping)");
  }
  return *child;
}

std::optional<ConfigReader> ConfigReader::optional_section(const std::string& key) {
  YAML::Node value = lookup(key);
  if (!value.IsDefined() || value.IsNull()) {
    resolved_[key] = YAML::Node(YAML::NodeType::Null);
    return std::nullopt;
  }
  if (!value.IsMap()) fail(key, "expected a mapping of keys, got " + describe_node(value));
  ConfigReader child(value, key_path(key), origin_);
  resolved_[key] = child.resolved_;
  return child;
}

std::vector<ConfigReader> ConfigReader::section_list(const std::string& key) {
  YAML::Node value = lookup(key);
  if (!value.IsDefined() || value.IsNull()) {
    throw_if_misspelt(node_, *consumed_, *this, key, "a list of mappings");
    fail(key, "required key is missing (expected a list of mappings)");
  }
  if (!value.IsSequence()) fail(key, "expected a list of mappings, got " + describe_node(value));
  std::vector<ConfigReader> out;
  YAML::Node resolved_list(YAML::NodeType::Sequence);
  for (size_t i = 0; i < value.size(); ++i) {
    std::string item_path = key_path(key) + "." + std::to_string(i);
    if (!value[i].IsMap())
      throw ConfigError(origin_prefix() + item_path + where(value[i]) + ": expected a mapping of keys, got " +
                        describe_node(value[i]));
    out.emplace_back(value[i], item_path, origin_);
    resolved_list.push_back(out.back().resolved_);
  }
  resolved_[key] = resolved_list;
  return out;
}

YAML::Node ConfigReader::raw(const std::string& key) {
  YAML::Node value = lookup(key);
  resolved_[key] = value.IsDefined() ? without_located_tags(value) : YAML::Node(YAML::NodeType::Null);
  return value;
}

void ConfigReader::ignore(const std::string& key) { raw(key); }

void ConfigReader::finish() const {
  std::vector<std::string> unknown;
  for (const auto& entry : node_) {
    std::string key = entry.first.as<std::string>();
    if (std::find(consumed_->begin(), consumed_->end(), key) == consumed_->end()) unknown.push_back(key);
  }
  if (unknown.empty()) return;
  std::string known;
  for (const auto& k : *consumed_) known += (known.empty() ? "" : ", ") + k;
  const YAML::Node& constant = node_;
  throw ConfigError(origin_prefix() + key_path(unknown.front()) + where(constant[unknown.front()]) +
                    ": unknown key (expected one of: " + known + ")");
}

YAML::Node load_yaml_file(const std::string& file) {
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) throw ConfigError(file + ": is a folder, not a config file");
  std::ifstream in(file);
  if (!in) throw ConfigError(file + ": cannot open the config file");
  std::stringstream text;
  text << in.rdbuf();
  return yaml_text::load_checked(text.str(), file);
}

void apply_override(YAML::Node& root, const std::string& assignment) {
  size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) throw ConfigError("--set " + assignment + ": expected KEY.PATH=VALUE");
  std::string path = assignment.substr(0, eq);
  YAML::Node value;
  try {
    value = YAML::Load(assignment.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    throw ConfigError("--set " + assignment + ": the value is not valid YAML: " + e.what());
  }
  yaml_text::check_tree(value, "--set " + assignment, "");
  // A scalar parsed from the command line would carry "line 1" of the override text into
  // error messages; a fresh node carries no position.
  if (value.IsScalar())
    value = YAML::Node(value.Scalar());
  else if (value.IsNull())
    value = YAML::Node(YAML::NodeType::Null);
  std::vector<std::string> parts;
  std::stringstream split(path);
  for (std::string part; std::getline(split, part, '.');) {
    if (part.empty()) throw ConfigError("--set " + assignment + ": empty key in '" + path + "'");
    parts.push_back(part);
  }
  // Walk with fresh Node handles: yaml-cpp's Node assignment rebinds, so keep a chain.
  std::vector<YAML::Node> chain{root};
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node current = chain.back();
    YAML::Node next;
    if (current.IsSequence()) {
      int64_t index = -1;
      try {
        index = std::stoll(parts[i]);
      } catch (const std::exception&) {
      }
      if (index < 0 || index >= static_cast<int64_t>(current.size()))
        throw ConfigError("--set " + assignment + ": '" + parts[i] + "' is not an index of the list at that point");
      next = current[static_cast<size_t>(index)];
    } else {
      if (current.IsNull() || !current.IsDefined()) current = YAML::Node(YAML::NodeType::Map);
      if (!current[parts[i]].IsDefined() || current[parts[i]].IsNull())
        current[parts[i]] = YAML::Node(YAML::NodeType::Map);
      next = current[parts[i]];
    }
    chain.push_back(next);
  }
  YAML::Node parent = chain.back();
  if (parent.IsSequence()) {
    int64_t index = -1;
    try {
      index = std::stoll(parts.back());
    } catch (const std::exception&) {
    }
    if (index < 0 || index >= static_cast<int64_t>(parent.size()))
      throw ConfigError("--set " + assignment + ": '" + parts.back() + "' is not an index of the list");
    parent[static_cast<size_t>(index)] = value;
  } else {
    parent[parts.back()] = value;
  }
}

std::string to_yaml_text(const YAML::Node& node) {
  YAML::Emitter out;
  out.SetIndent(2);
  out << node;
  return std::string(out.c_str()) + "\n";
}

}  // namespace triax
