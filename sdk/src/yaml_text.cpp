#include "yaml_text.hpp"

#include <algorithm>
#include <vector>

#include "triax/error.hpp"

namespace triax::yaml_text {
namespace {

// Far above any real config (a few hundred values, five levels); a file beyond these is a
// mistake or an alias bomb, refused before anything copies the tree.
constexpr int kMaxDepth = 64;
constexpr size_t kMaxValues = 100000;

std::string prefix(const std::string& origin) { return origin.empty() ? "" : origin + ": "; }

std::string line_text(const YAML::Mark& mark) {
  return mark.line < 0 ? "" : " (line " + std::to_string(mark.line + 1) + ")";
}

std::string child_path(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

class TreeCheck {
 public:
  explicit TreeCheck(const std::string& origin) : origin_(origin) {}

  void visit(const YAML::Node& node, const std::string& path, const YAML::Mark& at) {
    if (++values_ > kMaxValues)
      fail(path, at, "the document has more than " + std::to_string(kMaxValues) +
                         " values (counting every alias expansion); a config is far smaller");
    for (const YAML::Node& ancestor : ancestors_)
      if (ancestor.is(node)) fail(path, at, "an alias refers to a node that contains it (an endless loop)");
    if (static_cast<int>(ancestors_.size()) >= kMaxDepth)
      fail(path, at, "nested deeper than " + std::to_string(kMaxDepth) + " levels");
    if (!node.IsMap() && !node.IsSequence()) return;
    ancestors_.push_back(node);
    if (node.IsSequence()) {
      size_t index = 0;
      for (const YAML::Node& item : node) visit(item, child_path(path, std::to_string(index++)), item.Mark());
    } else {
      visit_map(node, path);
    }
    ancestors_.pop_back();
  }

 private:
  void visit_map(const YAML::Node& node, const std::string& path) {
    std::vector<std::pair<std::string, YAML::Mark>> seen;
    for (const auto& entry : node) {
      if (!entry.first.IsScalar())
        fail(path, entry.first.Mark(), "a key must be a plain string, not a list or a mapping");
      const std::string key = entry.first.Scalar();
      for (const auto& [earlier, mark] : seen)
        if (earlier == key)
          fail(child_path(path, key), entry.first.Mark(),
               "duplicate key (first given" + line_text(mark) + "); a key may appear only once in a mapping");
      seen.emplace_back(key, entry.first.Mark());
      visit(entry.second, child_path(path, key), entry.first.Mark());
    }
  }

  [[noreturn]] void fail(const std::string& path, const YAML::Mark& at, const std::string& what) const {
    const std::string where = path.empty() ? "the document" : path;
    throw ConfigError(prefix(origin_) + where + line_text(at) + ": " + what);
  }

  const std::string& origin_;
  std::vector<YAML::Node> ancestors_;
  size_t values_ = 0;
};

// Where a quoted scalar starting at `start` (its opening quote) ends, or npos at the end of the
// text: yaml-cpp takes an unclosed quote as running to the end of the file.
size_t closing_quote(const std::string& text, size_t start) {
  const char quote = text[start];
  for (size_t i = start + 1; i < text.size(); ++i) {
    if (quote == '"' && text[i] == '\\') {
      ++i;  // an escaped character, \" included
    } else if (text[i] == quote) {
      if (quote == '\'' && i + 1 < text.size() && text[i + 1] == '\'') {
        ++i;  // '' is a quote inside a single-quoted string
      } else {
        return i;
      }
    }
  }
  return std::string::npos;
}

// Indentation (spaces) of the line that holds position `at`.
size_t indentation_at(const std::string& text, size_t at) {
  size_t start = text.rfind('\n', at);
  start = start == std::string::npos ? 0 : start + 1;
  size_t end = start;
  while (end < text.size() && text[end] == ' ') ++end;
  return end - start;
}

// A quoted string may go on over several lines, but YAML wants those lines indented deeper than
// the line it starts on: a line as shallow as that (the next key) means the quote was never
// closed where it should have been, and the string ran on into the keys below. The first such
// line, or npos.
size_t runs_into_line(const std::string& text, size_t start, size_t end) {
  const size_t base = indentation_at(text, start);
  for (size_t newline = text.find('\n', start); newline != std::string::npos && newline < end;
       newline = text.find('\n', newline + 1)) {
    const size_t next = newline + 1;
    size_t content = next;
    while (content < text.size() && text[content] == ' ') ++content;
    const bool blank = content >= text.size() || text[content] == '\n';
    if (!blank && content < end && content - next <= base) return next;
  }
  return std::string::npos;
}

void check_quotes_closed(const YAML::Node& node, const std::string& text, const std::string& origin,
                         const std::string& path, int depth) {
  if (depth > kMaxDepth) return;  // the tree check reports it
  if (node.IsScalar()) {
    const YAML::Mark mark = node.Mark();
    const bool quoted = node.Tag() == "!" && mark.pos >= 0 && static_cast<size_t>(mark.pos) < text.size() &&
                        (text[mark.pos] == '"' || text[mark.pos] == '\'');
    if (!quoted) return;
    const size_t start = static_cast<size_t>(mark.pos);
    const size_t end = closing_quote(text, start);
    const std::string opened = "the quoted string starting at line " + std::to_string(mark.line + 1) + ", column " +
                               std::to_string(mark.column + 1);
    const std::string where = prefix(origin) + (path.empty() ? "the document" : path) + line_text(mark);
    if (end == std::string::npos) throw ConfigError(where + ": not valid YAML: " + opened + " is never closed");
    const size_t runs_into = runs_into_line(text, start, end);
    if (runs_into != std::string::npos)
      throw ConfigError(where + ": not valid YAML: " + opened + " is not closed before line " +
                        std::to_string(1 + std::count(text.begin(), text.begin() + static_cast<long>(runs_into), '\n')) +
                        ", which is no deeper than its key");
    return;
  }
  if (node.IsSequence()) {
    size_t index = 0;
    for (const YAML::Node& item : node)
      check_quotes_closed(item, text, origin, child_path(path, std::to_string(index++)), depth + 1);
  } else if (node.IsMap()) {
    for (const auto& entry : node)
      check_quotes_closed(entry.second, text, origin, child_path(path, entry.first.Scalar()), depth + 1);
  }
}

// The line (1-based) of a '---' that starts a document after content, even an empty one (which
// yaml-cpp drops), or 0.
int second_document_line(const std::string& text) {
  bool content = false;
  int line = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string current = text.substr(at, end - at);
    ++line;
    const bool marker = current.rfind("---", 0) == 0 && (current.size() == 3 || current[3] == ' ' || current[3] == '\t');
    if (marker && content) return line;
    const size_t first = current.find_first_not_of(" \t\r");
    if (!marker && first != std::string::npos && current[first] != '#' && current[first] != '%') content = true;
    at = end + 1;
  }
  return 0;
}

}  // namespace

void check_tree(const YAML::Node& root, const std::string& origin, const std::string& root_path) {
  TreeCheck(origin).visit(root, root_path, root.Mark());
}

YAML::Node load_checked(const std::string& text, const std::string& origin) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    const std::string where = e.mark.is_null() ? "" : " at line " + std::to_string(e.mark.line + 1) + ", column " +
                                                          std::to_string(e.mark.column + 1);
    throw ConfigError(prefix(origin) + "not valid YAML" + where + ": " + e.msg);
  }
  const int second = second_document_line(text);
  if (documents.size() > 1 || second > 0)
    throw ConfigError(prefix(origin) + (second > 0 ? "line " + std::to_string(second) + ": " : "") +
                      "a second YAML document (after '---'); a config holds exactly one document");
  YAML::Node document = documents.empty() ? YAML::Node(YAML::NodeType::Null) : documents.front();
  check_tree(document, origin, "");
  check_quotes_closed(document, text, origin, "", 0);
  return document;
}

}  // namespace triax::yaml_text
