// YAML handed to a plugin that keeps where it came from. The host re-emits a section of the
// config (model.model_config, model.init_method, optimizer) for the plugin: the text puts every
// value on the line it had in the file (blank lines pad the gaps; collections written in flow
// style stay in flow style) and names the file in a tag on the document. This is the format's
// plugin side, which ConfigReader reads, so that a plugin's error names the file and the line as
// the host's own errors do, and the host's side, which writes it (to_located_yaml_text).
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

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

// The host's side: `node` as parsed from `origin` (its marks intact; values without a mark, set by
// --set or filled in by the host, go on the next free line) re-emitted as located YAML. Top-level
// keys in `skip` are left out.
std::string to_located_yaml_text(const YAML::Node& node, const std::string& origin,
                                 const std::vector<std::string>& skip = {});

}  // namespace triax
