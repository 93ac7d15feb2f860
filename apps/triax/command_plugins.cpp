// `triax plugins [--path DIR]...`: what the loader finds, and what it refuses and why.
#include <algorithm>
#include <boost/program_options.hpp>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "parsed_options.hpp"
#include "triax/core/plugins/plugin_registry.hpp"

namespace triax::cli {
namespace {

namespace po = boost::program_options;

// Prints rows as columns, each as wide as its widest cell; the last column is not padded.
void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) {
      if (widths.size() <= c) widths.push_back(0);
      widths[c] = std::max(widths[c], row[c].size());
    }
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(widths[c] - row[c].size() + 2, ' ');
    }
    std::cout << line << '\n';
  }
}

// `triax plugins`'s options: the folders scanned besides the default ones.
struct PluginsOptions {
  std::vector<std::string> paths;
};

Parsed<PluginsOptions> parse_plugins_options(const std::vector<std::string>& args) {
  po::options_description options(
      "triax plugins [--path DIR]...\n\n"
      "Lists the plugins found in the default plugin folders (next to the triax\n"
      "executable, then TRIAX_PLUGIN_PATH) and in the given folders, and the\n"
      "libraries refused with the reason.\n\nOptions");
  PluginsOptions parsed;
  options.add_options()("help,h", "show this help")(
      "path,p", po::value<std::vector<std::string>>(&parsed.paths)->composing(), "also scan this folder (repeatable)");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(options).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "triax plugins: " << e.what() << "\n\n" << options << '\n';
    return Parsed<PluginsOptions>::leave(kExitInvalidConfig);
  }
  if (vm.count("help") != 0) {
    std::cout << options << '\n';
    return Parsed<PluginsOptions>::leave(kExitOk);
  }
  return parsed;
}

void print_plugins(const PluginRegistry& registry) {
  if (registry.plugins().empty()) {
    std::cout << "no plugins found\n";
    return;
  }
  std::vector<PluginRecord> plugins = registry.plugins();
  std::stable_sort(plugins.begin(), plugins.end(), [](const PluginRecord& a, const PluginRecord& b) {
    return a.kind != b.kind ? a.kind < b.kind : a.name < b.name;
  });
  std::vector<std::vector<std::string>> rows = {{"KIND", "NAME", "VERSION", "DESCRIPTION", "LIBRARY"}};
  for (const PluginRecord& p : plugins)
    rows.push_back({plugin_kind_name(p.kind), p.name, p.version, p.description, p.library_path});
  print_table(rows);
}

int list_plugins(const PluginsOptions& options) {
  PluginRegistry registry;
  registry.scan_search_paths(options.paths);

  std::cout << "searched folders:";
  if (registry.searched_folders().empty()) std::cout << " none";
  std::cout << '\n';
  for (const std::string& folder : registry.searched_folders()) std::cout << "  " << folder << '\n';
  std::cout << '\n';
  print_plugins(registry);
  if (!registry.refusals().empty()) {
    std::cout << "\nrefused libraries:\n";
    for (const PluginRefusal& r : registry.refusals())
      std::cout << "  " << r.library_path << "\n    " << r.reason << '\n';
  }
  return kExitOk;
}

}  // namespace

int run_plugins_command(const std::vector<std::string>& args) {
  return run_parsed(parse_plugins_options(args), list_plugins);
}

}  // namespace triax::cli
