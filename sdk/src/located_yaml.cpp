#include "triax/located_yaml.hpp"

#include <cctype>
#include <cstdio>

namespace triax {
namespace {

// A verbatim tag holds URI characters only: the file name is percent-encoded.
constexpr const char* kOriginTag = "tag:triax,2026:origin/";

std::string percent_encoded(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '/' || c == '.' || c == '_' || c == '-') {
      out += static_cast<char>(c);
    } else {
      char escaped[4];
      std::snprintf(escaped, sizeof(escaped), "%%%02X", c);
      out += escaped;
    }
  }
  return out;
}

std::string percent_decoded(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      out += static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

}  // namespace

std::string located_origin_tag(const std::string& origin) { return kOriginTag + percent_encoded(origin); }

std::string located_origin(const YAML::Node& root) {
  const std::string& tag = root.Tag();
  const std::string prefix = kOriginTag;
  return tag.rfind(prefix, 0) == 0 ? percent_decoded(tag.substr(prefix.size())) : "";
}

bool located_unplaced(const YAML::Node& node) { return node.Tag() == kLocatedUnplacedTag; }

YAML::Node without_located_tags(const YAML::Node& node) {
  YAML::Node copy = YAML::Clone(node);
  std::vector<YAML::Node> pending{copy};
  while (!pending.empty()) {
    YAML::Node current = pending.back();
    pending.pop_back();
    if (located_unplaced(current)) current.SetTag("?");
    if (current.IsMap())
      for (auto entry : current) pending.push_back(entry.second);
    else if (current.IsSequence())
      for (auto item : current) pending.push_back(item);
  }
  return copy;
}

std::string located_origin(const std::string& text) {
  const std::string prefix = std::string("--- !<") + kOriginTag;
  if (text.rfind(prefix, 0) != 0) return "";
  const size_t end = text.find('>', prefix.size());
  return end == std::string::npos ? "" : percent_decoded(text.substr(prefix.size(), end - prefix.size()));
}

}  // namespace triax
