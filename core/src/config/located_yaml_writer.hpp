// The host's side of located YAML (triax/located_yaml.hpp): a config section re-emitted for a
// plugin with every value on the line it had in the file and the file named in the document's tag.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

namespace triax {

// `node` as parsed from `origin` (its marks intact; values without a mark, set by --set or
// filled in by the host, go on the next free line). Top-level keys in `skip` are left out.
std::string to_located_yaml_text(const YAML::Node& node, const std::string& origin,
                                 const std::vector<std::string>& skip = {});

}  // namespace triax
