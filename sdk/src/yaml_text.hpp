// Parsing YAML text the way every config file and config section is parsed: one document, no
// duplicate keys, every quoted string closed, no alias cycles, bounded depth and size. yaml-cpp
// accepts each of these silently (the first duplicate wins, a second document and an unclosed
// quote at the end of the file are ignored); here each is a ConfigError naming the file, the line
// and the key path.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

namespace triax::yaml_text {

// Parses `text` (from `origin`, a file name or "" when unknown) and checks it as above.
YAML::Node load_checked(const std::string& text, const std::string& origin);

// The tree checks alone, for a node not parsed from text (an override's value).
void check_tree(const YAML::Node& root, const std::string& origin, const std::string& root_path);

}  // namespace triax::yaml_text
