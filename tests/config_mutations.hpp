// Mutations of a config file's text for the config fuzzer: on its parsed tree (a deleted key, a
// value of the wrong type, out of range, huge, in unicode, nested too deep) or on its lines (a
// duplicate key, YAML syntax errors, a second document, anchors and aliases, alias cycles and
// bombs, a truncated file). Deterministic for a given random engine state.
#pragma once

#include <random>
#include <string>

namespace triax::config_fuzz {

struct Mutation {
  std::string text;         // the mutated file
  std::string kind;         // "delete", "wrong_type", "syntax", ...
  std::string description;  // what was done where, for failure messages
  std::string key;          // the key the error should name ("" when only a line can be named)
  bool must_fail = false;   // no valid config can come out of it
};

Mutation mutate(const std::string& text, std::mt19937& random);

}  // namespace triax::config_fuzz
