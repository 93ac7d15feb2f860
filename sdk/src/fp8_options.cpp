// The `fp8` config section (triax/fp8_options.hpp): read by the core to validate the config, and by the
// SDK from the text the host passes to the model.
#include <string>

#include "triax/error.hpp"
#include "triax/fp8_options.hpp"

namespace triax {

const char* fp8_recipe_name(Fp8Recipe recipe) { return recipe == Fp8Recipe::Rowwise ? "rowwise" : "tensorwise"; }

Fp8Options Fp8Options::read(ConfigReader& section) {
  Fp8Options options;
  options.recipe = section.choice("recipe", {"tensorwise", "rowwise"}, std::string("tensorwise")) == "rowwise"
                       ? Fp8Recipe::Rowwise
                       : Fp8Recipe::Tensorwise;
  options.linears = section.get<std::vector<std::string>>("linears", options.linears);
  if (options.linears.empty())
    section.fail("linears", "lists no pattern; leave the fp8 section out to train without fp8");
  for (const std::string& pattern : options.linears)
    if (pattern.empty()) section.fail("linears", "holds an empty pattern (\"*\" matches every decoder linear)");
  options.min_gemm_size = section.get<int64_t>("min_gemm_size", options.min_gemm_size);
  if (options.min_gemm_size < 0)
    section.fail("min_gemm_size",
                 "must be 0 or more (0 keeps every linear in fp8), got " + std::to_string(options.min_gemm_size));
  section.finish();
  return options;
}

Fp8Options Fp8Options::from_yaml(const std::string& text) {
  ConfigReader section = ConfigReader::from_text(text, "fp8");
  return read(section);
}

}  // namespace triax
