// YAML handed to a plugin that keeps where it came from. The host re-emits a section of the
// config (model.model_config, model.init_method, optimizer) for the plugin: the text puts every
// value on the line it had in the file (blank lines pad the gaps; collections written in flow
// style stay in flow style) and names the file in a tag on the document. This is the format's
// plugin side, which ConfigReader reads, so that a plugin's error names the file and the line as
// the host's own errors do; the host's writer is core's config/located_yaml_writer.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

namespace triax {

// The document's tag that names the file `origin` (percent-encoded: a tag holds URI characters only).
std::string located_origin_tag(const std::string& origin);
// The tag of a value that was not in the file (a default the host filled in, a --set value): its
// line in the text is nobody's line of the file.
inline constexpr const char* kLocatedUnplacedTag = "tag:triax,2026:unplaced";

// The file that located_origin_tag named in `root`'s tag, or in the first line of its `text`;
// "" for anything else.
std::string located_origin(const YAML::Node& root);
std::string located_origin(const std::string& text);

// Whether the host marked `node` as not from the file (it has no line there).
bool located_unplaced(const YAML::Node& node);

// A copy of `node` without those marks, for a resolved configuration people read.
YAML::Node without_located_tags(const YAML::Node& node);

}  // namespace triax
