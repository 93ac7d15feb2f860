// The reference against the loader. The loader's resolved trees of the probes list every key it
// reads; each must be documented, and each documented key must be among them. Then every
// documented key's type is tried on the loader: its bounds (the minimum accepted, one below
// refused), its choices (each accepted, another refused), a value of the wrong kind refused,
// null accepted where the reference allows it, a required key's absence refused; every refusal
// must name the key. A documented default must be of the documented type.
#include <yaml-cpp/yaml.h>

#include <map>
#include <set>

#include "reference_tables.hpp"
#include "triax/config_reader.hpp"
#include "triax/error.hpp"

namespace triax::config_reference {
namespace {

class DriftCheck {
 public:
  explicit DriftCheck(const Reference& reference) {
    for (const Section& section : reference.sections) {
      sections_.insert(section.path);
      for (const Key& key : section.keys) rows_[full_path(section, key)] = {&section, &key};
    }
  }

  std::vector<std::string> run() {
    for (const Probe& probe : probes()) walk(probe.resolved, "", "");
    for (const auto& [full, row] : rows_) {
      if (!seen_.count(full)) {
        problem(full, "is documented, but the loader does not read it");
        continue;
      }
      check_required(full, *row.key);
      if (!row.key->handed_on) check_type(full, *row.key);
    }
    return problems_;
  }

 private:
  struct Row {
    const Section* section;
    const Key* key;
  };
  // Where a key is tried: the first probe whose input holds the key's parent mapping, else the
  // first whose resolved tree holds the key (an override creates the missing sections).
  struct Target {
    const Probe* probe = nullptr;
    std::vector<std::string> path;
    std::vector<std::string> needs;  // the key's Key::needs
  };

  void problem(const std::string& full, const std::string& what) {
    problems_.push_back("config reference: " + full + " " + what);
  }

  void walk(const YAML::Node& map, const std::string& section, const std::string& prefix) {
    for (const auto& entry : map) {
      const std::string name = prefix + entry.first.Scalar();
      const std::string full = section.empty() ? name : section + "." + name;
      const YAML::Node& value = entry.second;
      const bool documented = rows_.count(full) > 0;
      if (documented) seen_.insert(full);
      if (sections_.count(full)) {
        if (value.IsMap()) walk(value, full, "");
      } else if (sections_.count(full + "[]")) {
        if (value.IsSequence())
          for (const YAML::Node& item : value) walk(item, full + "[]", "");
      } else if (!documented) {
        if (value.IsMap() && value.size() > 0)
          walk(value, section, name + ".");
        else if (undocumented_.insert(full).second)  // once, though several probes show it
          problem(full, "is read by the loader, but the reference does not document it");
      }
    }
  }

  std::optional<Target> target_of(const std::string& full) const {
    for (const Probe& probe : probes())
      if (std::optional<std::vector<std::string>> path = locate(probe.input, full))
        return Target{&probe, *path, rows_.at(full).key->needs};
    for (const Probe& probe : probes())
      if (std::optional<std::vector<std::string>> path = locate(probe.resolved, full))
        return Target{&probe, *path, rows_.at(full).key->needs};
    return std::nullopt;
  }

  // The target's probe with the key set to `value` (YAML text), or removed when `value` is empty.
  static LoaderResult try_value(const Target& target, const std::string& value) {
    YAML::Node document = YAML::Clone(target.probe->input);
    for (const std::string& assignment : target.needs) apply_override(document, assignment);
    if (value.empty()) {
      std::vector<std::string> parent(target.path.begin(), target.path.end() - 1);
      YAML::Node holder = node_at(document, parent);
      holder.remove(target.path.back());
    } else {
      apply_override(document, path_text(target.path) + "=" + value);
    }
    return run_loader(document);
  }

  void expect_accepted(const std::string& full, const Target& target, const std::string& value) {
    const LoaderResult result = try_value(target, value);
    if (!result.resolved)
      problem(full, "= " + value + " is allowed by the reference, but the loader refuses it: " + result.error);
  }

  void expect_refused(const std::string& full, const Target& target, const std::string& value, const std::string& why) {
    const LoaderResult result = try_value(target, value);
    const std::string shown = value.empty() ? "left out" : "= " + value;
    if (result.resolved)
      problem(full, shown + " is refused by the reference (" + why + "), but the loader accepts it");
    else if (result.error.find(path_text(target.path)) == std::string::npos)
      problem(full, shown + " is refused, but the loader's message does not name the key: " + result.error);
  }

  void check_required(const std::string& full, const Key& key) {
    if (!key.required) return;
    const std::optional<Target> target = target_of(full);
    if (!target || !node_at(target->probe->input, target->path).IsDefined()) {
      problem(full, "is documented as required, but the loader does not need it in any probe");
      return;
    }
    expect_refused(full, *target, "", "it is required");
  }

  void check_type(const std::string& full, const Key& key) {
    const std::optional<Target> target = target_of(full);
    if (!target) return;  // not reached: run() saw the key
    const ValueType& type = key.type;
    const auto number = [](double value) { return YAML::Node(value).Scalar(); };
    switch (type.kind) {
      case Kind::Int:
        expect_refused(full, *target, "1.5", "not an integer");
        if (type.min) {
          expect_accepted(full, *target, number(*type.min));
          expect_refused(full, *target, number(*type.min - 1), "below its minimum");
        }
        break;
      case Kind::Number:
        expect_refused(full, *target, "abc", "not a number");
        if (type.min && type.min_exclusive) {
          expect_refused(full, *target, number(*type.min), "not above its bound");
          expect_accepted(full, *target, number(*type.min + 1));
        } else if (type.min) {
          expect_refused(full, *target, number(*type.min - 1), "below its minimum");
          expect_accepted(full, *target, number(*type.min));
        }
        break;
      case Kind::Bool:
        expect_refused(full, *target, "maybe", "not a bool");
        break;
      case Kind::String:
        expect_refused(full, *target, "[1, 2]", "not a string");
        break;
      case Kind::Choice:
        for (const std::string& c : type.choices) expect_accepted(full, *target, c);
        expect_refused(full, *target, "no_such_choice", "not one of the choices");
        break;
      case Kind::List:
      case Kind::StringOrList:
      case Kind::Mapping:
        expect_refused(full, *target, "{a: 1}", "not a list");
        break;
      case Kind::Null:
        expect_refused(full, *target, "{a: 1}", "accepted only as null");
        expect_accepted(full, *target, "null");
        break;
    }
    if (type.nullable) expect_accepted(full, *target, "null");
    if (!key.required && key.default_text.empty()) check_default(full, *target, type);
  }

  // The loader's default, for a key the probe leaves out, is of the documented type.
  void check_default(const std::string& full, const Target& target, const ValueType& type) {
    const YAML::Node value = node_at(target.probe->resolved, target.path);
    if (!value.IsDefined() || node_at(target.probe->input, target.path).IsDefined()) return;
    if (value.IsNull()) {
      if (!type.nullable && type.kind != Kind::Null)
        problem(full, "defaults to null, but the reference does not allow null");
      return;
    }
    bool fits = false;
    try {
      switch (type.kind) {
        case Kind::Int:
          value.as<int64_t>();
          fits = true;
          break;
        case Kind::Number:
          value.as<double>();
          fits = true;
          break;
        case Kind::Bool:
          value.as<bool>();
          fits = true;
          break;
        case Kind::String:
          fits = value.IsScalar();
          break;
        case Kind::StringOrList:
          fits = value.IsScalar() || value.IsSequence();
          break;
        case Kind::Choice:
          for (const std::string& c : type.choices) fits = fits || (value.IsScalar() && value.Scalar() == c);
          break;
        case Kind::List:
          fits = value.IsSequence();
          break;
        case Kind::Mapping:
          fits = value.IsMap();
          break;
        case Kind::Null:
          break;
      }
    } catch (const YAML::Exception&) {
    }
    if (!fits) problem(full, "defaults to " + YAML::Dump(value) + ", which is not " + type.text());
  }

  std::set<std::string> sections_;
  std::map<std::string, Row> rows_;
  std::set<std::string> seen_;
  std::set<std::string> undocumented_;
  std::vector<std::string> problems_;
};

}  // namespace

std::vector<std::string> find_reference_drift(const Reference& reference) { return DriftCheck(reference).run(); }

}  // namespace triax::config_reference
