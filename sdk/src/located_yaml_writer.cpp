// The host's side of located YAML: a config section re-emitted for a plugin with every value on
// the line it had in the file and the file named in the document's tag.
#include <algorithm>

#include "triax/located_yaml.hpp"

namespace triax {
namespace {

// 0-based line of the file; -1 for a value without a mark. A copy made with YAML::Clone has line
// 0 for every value, which no section handed to a plugin can truly start on.
int file_line(const YAML::Node& node) { return node.Mark().line > 0 ? node.Mark().line : -1; }

// Writes text line by line, each value at its line of the file where it can.
class LineWriter {
 public:
  explicit LineWriter(std::string first_line) : text_(std::move(first_line)) {}

  // Starts a new line: the node's own line when it is still ahead, else the next one.
  void new_line(const YAML::Node& node, const std::string& indent) {
    const int wanted = file_line(node);
    do {
      text_ += "\n";
      ++line_;
    } while (line_ < wanted);
    text_ += indent;
  }
  // Within a flow collection: moves down to the node's line when it is ahead, else stays.
  void flow_break(const YAML::Node& node, const std::string& indent) {
    const int wanted = file_line(node);
    if (wanted <= line_) return;
    while (line_ < wanted) {
      text_ += "\n";
      ++line_;
    }
    text_ += indent;
  }
  void put(const std::string& text) { text_ += text; }
  std::string finish() { return text_ + "\n"; }

 private:
  // 0-based line of the file; -1 for a value without a mark. A copy made with YAML::Clone has
  // line 0 for every value, which no section handed to a plugin can truly start on.
  std::string text_;
  int line_ = 0;
};

bool has_marks(const YAML::Node& node) {
  if (file_line(node) >= 0) return true;
  if (node.IsMap()) {
    for (const auto& entry : node)
      if (has_marks(entry.second)) return true;
  } else if (node.IsSequence()) {
    for (const auto& item : node)
      if (has_marks(item)) return true;
  }
  return false;
}

// A key, or a value (tagged as not from the file when it has no line there; a null stays untagged:
// a tag would turn it into the string "null").
std::string scalar_text(const YAML::Node& node, bool is_key = false) {
  if (!node.IsDefined() || node.IsNull()) return "null";
  YAML::Emitter out;
  out << YAML::Flow << node;
  const bool unplaced = !is_key && file_line(node) < 0;
  return (unplaced ? std::string("!<") + kLocatedUnplacedTag + "> " : std::string()) + out.c_str();
}

bool is_flow(const YAML::Node& node) {
  return (node.IsMap() || node.IsSequence()) && node.Style() == YAML::EmitterStyle::Flow;
}

void write_flow(LineWriter& out, const YAML::Node& node, const std::string& indent) {
  if (node.IsMap()) {
    out.put("{");
    bool first = true;
    for (const auto& entry : node) {
      if (!first) out.put(", ");
      first = false;
      out.flow_break(entry.first, indent);
      out.put(scalar_text(entry.first, true) + ": ");
      write_flow(out, entry.second, indent);
    }
    out.put("}");
  } else if (node.IsSequence()) {
    out.put("[");
    bool first = true;
    for (const auto& item : node) {
      if (!first) out.put(", ");
      first = false;
      out.flow_break(item, indent);
      write_flow(out, item, indent);
    }
    out.put("]");
  } else {
    out.put(scalar_text(node));
  }
}

void write_block(LineWriter& out, const YAML::Node& node, const std::string& indent,
                 const std::vector<std::string>& skip);

// After "key:" or "-": a scalar or flow collection on the same line, a block collection below.
void write_value(LineWriter& out, const YAML::Node& value, const std::string& indent) {
  const bool empty = (value.IsMap() || value.IsSequence()) && value.size() == 0;
  if (value.IsMap() && !empty && !is_flow(value)) {
    write_block(out, value, indent + "  ", {});
  } else if (value.IsSequence() && !empty && !is_flow(value)) {
    write_block(out, value, indent + "  ", {});
  } else {
    out.put(" ");
    write_flow(out, value, indent + "  ");
  }
}

void write_block(LineWriter& out, const YAML::Node& node, const std::string& indent,
                 const std::vector<std::string>& skip) {
  if (node.IsMap()) {
    for (const auto& entry : node) {
      if (std::find(skip.begin(), skip.end(), entry.first.Scalar()) != skip.end()) continue;
      out.new_line(entry.first, indent);
      out.put(scalar_text(entry.first, true) + ":");
      write_value(out, entry.second, indent);
    }
  } else {
    for (const auto& item : node) {
      out.new_line(item, indent);
      out.put("-");
      write_value(out, item, indent);
    }
  }
}

}  // namespace

std::string to_located_yaml_text(const YAML::Node& node, const std::string& origin,
                                 const std::vector<std::string>& skip) {
  if (!has_marks(node)) {
    // Nothing of it comes from the file (a Hugging Face folder's config.json translated): plain
    // text, whose errors the host puts behind the file's name.
    YAML::Node kept = YAML::Clone(node);
    if (kept.IsMap())
      for (const std::string& key : skip) kept.remove(key);
    YAML::Emitter plain;
    plain << kept;
    return std::string(plain.c_str()) + "\n";
  }
  LineWriter out("--- !<" + located_origin_tag(origin) + ">");
  if (node.IsMap() && node.size() > 0 && !is_flow(node)) {
    write_block(out, node, "", skip);
  } else if (node.IsMap()) {
    YAML::Node kept(YAML::NodeType::Map);
    for (const auto& entry : node)
      if (std::find(skip.begin(), skip.end(), entry.first.Scalar()) == skip.end()) kept[entry.first] = entry.second;
    out.new_line(node, "");
    write_flow(out, node.size() == kept.size() ? node : kept, "  ");
  } else {
    out.new_line(node, "");
    write_flow(out, node, "  ");
  }
  return out.finish();
}

}  // namespace triax
