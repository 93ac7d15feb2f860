// The value checks every section reader shares.
#include <sstream>

#include "config_sections.hpp"

namespace triax::config {
namespace {

int64_t within(ConfigReader& r, const std::string& key, int64_t value, int64_t min, int64_t max) {
  if (value < min) r.fail(key, "must be at least " + std::to_string(min) + ", got " + std::to_string(value));
  if (value > max) r.fail(key, "must be at most " + std::to_string(max) + ", got " + std::to_string(value));
  return value;
}

}  // namespace

ConfigReader section_or_empty(ConfigReader& parent, const std::string& key) {
  std::optional<ConfigReader> present = parent.optional_section(key);
  if (present) return *present;
  ConfigReader empty(YAML::Node(YAML::NodeType::Map), parent.key_path(key), parent.origin());
  parent.resolved()[key] = empty.resolved();
  return empty;
}

int64_t required_int(ConfigReader& r, const std::string& key, int64_t min, int64_t max) {
  return within(r, key, r.required<int64_t>(key), min, max);
}

int64_t int_or(ConfigReader& r, const std::string& key, int64_t fallback, int64_t min, int64_t max) {
  return within(r, key, r.get<int64_t>(key, fallback), min, max);
}

std::optional<int64_t> optional_int(ConfigReader& r, const std::string& key, int64_t min, int64_t max) {
  std::optional<int64_t> value = r.optional<int64_t>(key);
  if (value) within(r, key, *value, min, max);
  return value;
}

std::string nonempty_string_or(ConfigReader& r, const std::string& key, const std::string& fallback) {
  std::string value = r.get<std::string>(key, fallback);
  if (value.empty()) r.fail(key, "must not be empty");
  return value;
}

std::optional<YAML::Node> optional_mapping(ConfigReader& r, const std::string& key, const std::string& what) {
  const bool given = r.contains(key);
  YAML::Node value = r.raw(key);
  if (!given) return std::nullopt;
  if (!value.IsMap()) r.fail(key, "expected a mapping (" + what + ")");
  return value;
}

std::string number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

}  // namespace triax::config
