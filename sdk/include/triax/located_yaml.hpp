// YAML handed to a plugin that keeps where it came from. The host re-emits a section of the
// config (model.model_config, model.init_method, optimizer) for the plugin: the text puts every
// value on the line it had in the file (blank lines pad the gaps; collections written in flow
// style stay in flow style) and names the file in a tag on the document, which ConfigReader
// reads. So a plugin's error names the file and the line, as the host's own errors do.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

namespace triax {

// `node` as parsed from `origin` (its marks intact; values without a mark, set by --set or
// filled in by the host, go on the next free line). Top-level keys in `skip` are left out.
std::string to_located_yaml_text(const YAML::Node& node, const std::string& origin,
                                 const std::vector<std::string>& skip = {});

// The file that to_located_yaml_text named in `root`'s tag, or in the first line of its `text`;
// "" for anything else.
std::string located_origin(const YAML::Node& root);
std::string located_origin(const std::string& text);

// Whether to_located_yaml_text marked `node` as not from the file (it has no line there).
bool located_unplaced(const YAML::Node& node);

// A copy of `node` without those marks, for a resolved configuration people read.
YAML::Node without_located_tags(const YAML::Node& node);

}  // namespace triax
