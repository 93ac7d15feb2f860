// The configuration reference: every key the loader reads, with its type, origin (nanotron's or
// triax's) and meaning. docs/config-reference.md is generated from it (`triax config-reference`),
// its defaults are taken from the loader itself (a minimal config run through it), and
// find_reference_drift() proves, against the loader, that the two say the same: every key the
// loader reads is documented and every documented key is read, with the type, bounds, choices and
// required-ness the reference states.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace triax::config_reference {

enum class Kind { Int, Number, Bool, String, Choice, List, Mapping, StringOrList, Null };

// A key's type as the reference states it and the drift check tests it.
struct ValueType {
  Kind kind = Kind::String;
  std::optional<double> min;         // Int, Number: the smallest value accepted...
  bool min_exclusive = false;        // ...or the bound itself refused (number > 0)
  std::vector<std::string> choices;  // Choice: every accepted spelling, as written in YAML
  std::string element;               // List: what the items are ("strings", "numbers > 0")
  bool nullable = false;             // null is accepted (and means the default)

  ValueType or_null() const {
    ValueType t = *this;
    t.nullable = true;
    return t;
  }
  std::string text() const;  // "int ≥ 1 or null", "`auto` \| `cpu`", for the table
};

ValueType integer(std::optional<double> min = std::nullopt);
ValueType number_above(double bound);     // > bound
ValueType number_at_least(double bound);  // ≥ bound
ValueType boolean();
ValueType string();
ValueType choice(std::vector<std::string> choices);
ValueType list_of(std::string element);
ValueType mapping();
ValueType string_or_list();
ValueType null_only();  // a nanotron section triax accepts only as null

struct Key {
  Key(std::string key_name, ValueType key_type, std::string key_origin, std::string key_notes)
      : name(std::move(key_name)),
        type(std::move(key_type)),
        origin(std::move(key_origin)),
        notes(std::move(key_notes)) {}

  std::string name;  // relative to its section; dotted for keys of a nested mapping ("data.seed")
  ValueType type;
  std::string origin;  // "nanotron" or "triax"
  std::string notes;   // markdown
  bool required = false;
  // The default column when the loader's own value would mislead (derived from other keys, or
  // expanded at load time). Empty: the value the loader records for a config without the key.
  std::string default_text;
  // Read by a plugin or a component after the loader: the loader keeps it as YAML and the
  // reference does not look inside.
  bool handed_on = false;
  // Overrides the key is only valid beside ("parallelism.recompute_layer=true"), applied
  // whenever the drift check tries a value of it.
  std::vector<std::string> needs;

  Key& must_be_given() {
    required = true;
    return *this;
  }
  Key& with_default(std::string text) {
    default_text = std::move(text);
    return *this;
  }
  Key& read_later() {
    handed_on = true;
    return *this;
  }
  Key& valid_beside(std::string assignment) {
    needs.push_back(std::move(assignment));
    return *this;
  }
};

struct Section {
  // The key path: "general", "optimizer.learning_rate_scheduler"; "[]" marks the items of a list
  // ("data_stages[]"); "" is the document's root (keys that are not sections).
  std::string path;
  std::string heading;  // markdown heading text
  int level = 3;        // ### or ####
  std::string intro;    // markdown before the table
  std::vector<Key> keys;
  std::string outro;  // markdown after the table
  bool origin_column = true;
  bool notes_column = true;
};

struct Reference {
  std::string preamble;  // markdown before the sections: parsing rules, overrides, types
  std::vector<Section> sections;
  std::string closing;  // markdown after them
};

// triax's configuration reference.
const Reference& reference();

// docs/config-reference.md for `reference`, defaults filled in from the loader.
std::string render_markdown(const Reference& reference);

// Every disagreement between `reference` and the loader, one message each, naming the key;
// empty when they agree.
std::vector<std::string> find_reference_drift(const Reference& reference);

}  // namespace triax::config_reference
