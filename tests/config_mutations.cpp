#include "config_mutations.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <regex>
#include <sstream>
#include <vector>

#include "triax/config_reader.hpp"

namespace triax::config_fuzz {
namespace {

template <class T>
const T& pick(const std::vector<T>& items, std::mt19937& random) {
  return items[std::uniform_int_distribution<size_t>(0, items.size() - 1)(random)];
}

// ---- on the tree ----------------------------------------------------------------------------

struct Place {
  std::vector<std::string> path;  // keys, or list indices as numbers
  std::vector<bool> is_index;
};

void collect(const YAML::Node& node, Place place, std::vector<Place>& out) {
  if (node.IsMap()) {
    for (const auto& entry : node) {
      Place child = place;
      child.path.push_back(entry.first.Scalar());
      child.is_index.push_back(false);
      out.push_back(child);
      collect(entry.second, child, out);
    }
  } else if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) {
      Place child = place;
      child.path.push_back(std::to_string(i));
      child.is_index.push_back(true);
      out.push_back(child);
      collect(node[i], child, out);
    }
  }
}

// The key an error about this place names: its own, or its list's.
std::string key_of(const Place& place) {
  for (size_t i = place.path.size(); i-- > 0;)
    if (!place.is_index[i]) return place.path[i];
  return "";
}

std::string dotted(const Place& place) {
  std::string out;
  for (const auto& part : place.path) out += (out.empty() ? "" : ".") + part;
  return out;
}

YAML::Node parent_of(YAML::Node root, const Place& place) {
  YAML::Node node = root;
  for (size_t i = 0; i + 1 < place.path.size(); ++i) {
    YAML::Node next = place.is_index[i] ? node[std::stoul(place.path[i])] : node[place.path[i]];
    node.reset(next);
  }
  return node;
}

void replace(YAML::Node root, const Place& place, const YAML::Node& value) {
  YAML::Node parent = parent_of(root, place);
  if (place.is_index.back())
    parent[std::stoul(place.path.back())] = value;
  else
    parent[place.path.back()] = value;
}

YAML::Node nested_lists(int depth) {
  std::string text(depth, '[');
  text += "1" + std::string(depth, ']');
  return YAML::Load(text);
}

Mutation on_tree(const std::string& text, std::mt19937& random) {
  YAML::Node root = YAML::Clone(YAML::Load(text));
  std::vector<Place> places;
  collect(root, {}, places);
  const Place& place = pick(places, random);
  Mutation m;
  m.key = key_of(place);
  static const std::vector<std::string> kinds = {"delete", "wrong_type", "out_of_range", "huge", "unicode",
                                                 "deep_nesting"};
  m.kind = pick(kinds, random);
  if (m.kind == "delete" && !place.is_index.back()) {
    parent_of(root, place).remove(place.path.back());
  } else if (m.kind == "delete" || m.kind == "wrong_type") {
    m.kind = "wrong_type";
    static const std::vector<std::string> values = {"[1, 2]", "{x: 1}", "abc", "true", "1.5", "''", "null"};
    replace(root, place, YAML::Load(pick(values, random)));
  } else if (m.kind == "out_of_range") {
    static const std::vector<std::string> values = {"-1", "0", "-9223372036854775808", "-1.0e-3"};
    replace(root, place, YAML::Node(pick(values, random)));
  } else if (m.kind == "huge") {
    static const std::vector<std::string> values = {"2147483648",          "1099511627776", "4611686018427387904",
                                                    "9223372036854775807", "99999999999999999999999",
                                                    "1.0e308",             "1.0e999"};
    replace(root, place, YAML::Node(pick(values, random)));
  } else if (m.kind == "unicode") {
    if (!place.is_index.back() && std::uniform_int_distribution<int>(0, 1)(random) == 0) {
      // The key itself, misspelt with a letter outside ASCII: unknown wherever it is.
      YAML::Node parent = parent_of(root, place);
      YAML::Node value = YAML::Clone(parent[place.path.back()]);
      parent.remove(place.path.back());
      parent[place.path.back() + "\xC3\xA9"] = value;
      m.must_fail = true;
    } else {
      replace(root, place, YAML::Node("h\xC3\xA9llo \xE2\x9C\x93 \xE6\x97\xA5\xE6\x9C\xAC"));
    }
  } else {
    replace(root, place, nested_lists(80));
    m.must_fail = true;
  }
  m.description = m.kind + " at " + dotted(place);
  m.text = to_yaml_text(root);
  return m;
}

// ---- on the lines ---------------------------------------------------------------------------

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) out += line + "\n";
  return out;
}

// Lines "  key: value" (block mappings with a value on the line): index, indent, key, value.
struct KeyLine {
  size_t index;
  std::string indent, key, value;
};

std::vector<KeyLine> key_lines(const std::vector<std::string>& lines) {
  static const std::regex pattern(R"(^( *)([A-Za-z_][A-Za-z0-9_]*): +([^#{\[][^#]*?) *(#.*)?$)");
  std::vector<KeyLine> out;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch match;
    if (std::regex_match(lines[i], match, pattern)) out.push_back({i, match[1], match[2], match[3]});
  }
  return out;
}

Mutation on_lines(const std::string& text, std::mt19937& random) {
  std::vector<std::string> lines = split_lines(text);
  const std::vector<KeyLine> keyed = key_lines(lines);
  const KeyLine& at = pick(keyed, random);
  Mutation m;
  static const std::vector<std::string> kinds = {"duplicate_key", "syntax",      "second_document", "alias",
                                                 "alias_cycle",   "alias_bomb", "truncate"};
  m.kind = pick(kinds, random);
  m.must_fail = true;
  if (m.kind == "duplicate_key") {
    lines.insert(lines.begin() + static_cast<long>(at.index) + 1, at.indent + at.key + ": " + at.value);
    m.key = at.key;
  } else if (m.kind == "syntax") {
    static const std::vector<std::string> breaks = {"\"unclosed", "[1, 2", "{a: 1", "a: b: c", "- item", "\tx", "'x"};
    const std::string& broken = pick(breaks, random);
    if (broken == "- item" || broken == "\tx")
      lines.insert(lines.begin() + static_cast<long>(at.index) + 1, at.indent + broken);
    else
      lines[at.index] = at.indent + at.key + ": " + broken;
  } else if (m.kind == "second_document") {
    lines.insert(lines.begin() + static_cast<long>(at.index) + 1, "---");
  } else if (m.kind == "alias") {
    // One value anchored, another replaced by the alias: a value of the right or wrong type.
    const KeyLine& other = pick(keyed, random);
    const size_t first = std::min(at.index, other.index), second = std::max(at.index, other.index);
    const KeyLine& anchored = first == at.index ? at : other;
    const KeyLine& aliased = first == at.index ? other : at;
    lines[first] = anchored.indent + anchored.key + ": &fuzz " + anchored.value;
    if (second != first) lines[second] = aliased.indent + aliased.key + ": *fuzz";
    m.key = aliased.key;
    m.must_fail = false;
  } else if (m.kind == "alias_cycle") {
    lines[at.index] = at.indent + at.key + ": &loop [1, *loop]";
    m.key = at.key;
  } else if (m.kind == "alias_bomb") {
    std::string bomb = "laughs:\n  l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n";
    for (int level = 1; level < 9; ++level) {
      bomb += "  l" + std::to_string(level) + ": &l" + std::to_string(level) + " [";
      for (int i = 0; i < 10; ++i) bomb += (i ? ", *l" : "*l") + std::to_string(level - 1);
      bomb += "]\n";
    }
    lines.push_back(bomb);
  } else {
    lines.resize(at.index + 1);
    lines.back() = lines.back().substr(0, lines.back().size() / 2);
    m.must_fail = false;
  }
  m.description = m.kind + " at line " + std::to_string(at.index + 1) + " (" + at.key + ")";
  m.text = join_lines(lines);
  return m;
}

}  // namespace

Mutation mutate(const std::string& text, std::mt19937& random) {
  return std::uniform_int_distribution<int>(0, 1)(random) == 0 ? on_tree(text, random) : on_lines(text, random);
}

}  // namespace triax::config_fuzz
