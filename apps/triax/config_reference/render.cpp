// docs/config-reference.md from the reference: the text around the tables as written, one table
// per section, and each default as the loader records it for a config that leaves the key out.
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <sstream>

#include "reference_tables.hpp"
#include "triax/error.hpp"

namespace triax::config_reference {
namespace {

std::string bound_text(double bound) {
  std::ostringstream out;
  if (bound < 0) out << "−";  // a typographic minus, as the tables write it
  out << std::fabs(bound);
  return out.str();
}

std::string quoted_choices(const std::vector<std::string>& choices) {
  std::string text;
  for (const std::string& c : choices) text += (text.empty() ? "`" : " \\| `") + c + "`";
  return text;
}

// A value as a table cell: `null`, `42`, `[SIGTERM, SIGUSR1]`.
std::string inline_yaml(const YAML::Node& value) {
  if (value.IsNull()) return "`null`";
  if (value.IsScalar()) return "`" + value.Scalar() + "`";
  YAML::Emitter out;
  out << YAML::Flow << value;
  return "`" + std::string(out.c_str()) + "`";
}

// Markdown cells hold one line: a line break in a note (the tables wrap them) is a space.
std::string one_line(const std::string& text) {
  std::string out;
  bool in_break = false;
  for (char c : text) {
    if (c == '\n') {
      in_break = true;
    } else if (in_break && c == ' ') {
      continue;
    } else {
      if (in_break) out += ' ';
      in_break = false;
      out += c;
    }
  }
  return out;
}

std::string default_cell(const Section& section, const Key& key) {
  if (!key.default_text.empty()) return key.default_text;
  if (key.required) return "—";
  const std::string full = full_path(section, key);
  for (const Probe& probe : probes()) {
    const std::optional<std::vector<std::string>> path = locate(probe.resolved, full);
    if (!path || node_at(probe.input, *path).IsDefined()) continue;
    const YAML::Node value = node_at(probe.resolved, *path);
    if (value.IsDefined()) return inline_yaml(value);
  }
  throw Error(TRIAX_ERROR_RUNTIME, "config reference: the loader records no default for " + full +
                                       "; mark it required or give its default's text");
}

void render_section(const Section& section, std::ostringstream& out) {
  out << std::string(static_cast<size_t>(section.level), '#') << ' ' << section.heading << "\n\n";
  if (!section.intro.empty()) out << section.intro << "\n\n";
  out << "| key | type | default |" << (section.origin_column ? " origin |" : "")
      << (section.notes_column ? " notes |" : "") << "\n|---|---|---|" << (section.origin_column ? "---|" : "")
      << (section.notes_column ? "---|" : "") << "\n";
  for (const Key& key : section.keys) {
    out << "| `" << key.name << "` | " << key.type.text() << " | " << default_cell(section, key) << " |";
    if (section.origin_column) out << ' ' << (key.origin == "triax" ? "**triax**" : key.origin) << " |";
    if (section.notes_column) out << (key.notes.empty() ? "" : " " + one_line(key.notes)) << " |";
    out << "\n";
  }
  out << "\n";
  if (!section.outro.empty()) out << section.outro << "\n\n";
}

// A value of `kind`, every other field at its default; `min` and `min_exclusive`: the bound.
ValueType value_type(Kind kind, std::optional<double> min = std::nullopt, bool min_exclusive = false) {
  ValueType t;
  t.kind = kind;
  t.min = min;
  t.min_exclusive = min_exclusive;
  return t;
}

}  // namespace

std::string ValueType::text() const {
  std::string t;
  switch (kind) {
    case Kind::Int:
      t = min ? "int ≥ " + bound_text(*min) : "int";
      break;
    case Kind::Number:
      t = min ? std::string("number ") + (min_exclusive ? "> " : "≥ ") + bound_text(*min) : "number";
      break;
    case Kind::Bool:
      t = "bool";
      break;
    case Kind::String:
      t = "string";
      break;
    case Kind::Choice:
      t = quoted_choices(choices);
      break;
    case Kind::List:
      t = "list of " + element;
      break;
    case Kind::Mapping:
      t = "mapping";
      break;
    case Kind::StringOrList:
      return nullable ? "string, list of strings or null" : "string or list of strings";
    case Kind::Null:
      return "null";
  }
  return nullable ? t + " or null" : t;
}

ValueType integer(std::optional<double> min) { return value_type(Kind::Int, min); }
ValueType number_above(double bound) { return value_type(Kind::Number, bound, true); }
ValueType number_at_least(double bound) { return value_type(Kind::Number, bound, false); }
ValueType boolean() { return value_type(Kind::Bool); }
ValueType string() { return value_type(Kind::String); }
ValueType choice(std::vector<std::string> choices) {
  ValueType t = value_type(Kind::Choice);
  t.choices = std::move(choices);
  return t;
}
ValueType list_of(std::string element) {
  ValueType t = value_type(Kind::List);
  t.element = std::move(element);
  return t;
}
ValueType mapping() { return value_type(Kind::Mapping); }
ValueType string_or_list() { return value_type(Kind::StringOrList); }
ValueType null_only() { return value_type(Kind::Null); }

std::string render_markdown(const Reference& reference) {
  std::ostringstream out;
  out << reference.preamble << "\n\n";
  for (const Section& section : reference.sections) render_section(section, out);
  out << reference.closing << "\n";
  return out.str();
}

}  // namespace triax::config_reference
