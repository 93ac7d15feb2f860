// fp8: which linears train in fp8 and how they are scaled (docs/fp8.md). The SDK reads the section
// (Fp8Options, triax/fp8.hpp); the core validates it here, with its key paths, and hands it to the
// model as text with its defaults filled in.
#include "config_sections.hpp"
#include "triax/fp8_options.hpp"

namespace triax::config {

std::optional<std::string> read_fp8(ConfigReader& root) {
  std::optional<ConfigReader> section = root.optional_section("fp8");
  if (!section) return std::nullopt;  // absent or null: no fp8
  Fp8Options::read(*section);
  return to_yaml_text(section->resolved());
}

}  // namespace triax::config
