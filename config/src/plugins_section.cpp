// plugins: extra folders searched for plugin libraries.
#include "config_sections.hpp"

namespace triax::config {

PluginsConfig read_plugins(ConfigReader& root) {
  ConfigReader r = section_or_empty(root, "plugins");
  PluginsConfig p;
  p.paths = r.get<std::vector<std::string>>("paths", {});
  for (size_t i = 0; i < p.paths.size(); ++i)
    if (p.paths[i].empty()) r.fail("paths." + std::to_string(i), "an entry is empty");
  r.finish();
  return p;
}

}  // namespace triax::config
