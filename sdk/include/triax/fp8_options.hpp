// The `fp8` config section as the SDK reads it (docs/fp8.md): the scaling recipe and which
// linears compute in fp8. No LibTorch here: the core's config loader reads it too.
#pragma once

#include <string>
#include <vector>

#include "triax/config_reader.hpp"

namespace triax {

// How a linear's operands are scaled into fp8 (their amax computed on the fly, every step):
//   Tensorwise: one scale per tensor; forward e4m3 x e4m3, backward grad_output in e5m2.
//   Rowwise:    one scale per row along the contraction dimension; every operand e4m3.
enum class Fp8Recipe { Tensorwise, Rowwise };

const char* fp8_recipe_name(Fp8Recipe recipe);

struct Fp8Options {
  Fp8Recipe recipe = Fp8Recipe::Tensorwise;
  // Patterns ('*' matches any run of characters) over the linears' module names, such as
  // "model.layers.*.mlp.*"; "*" converts every decoder linear. The output head stays in the
  // model's dtype whatever the patterns say.
  std::vector<std::string> linears = {"*"};
  // With the default `linears`, a layer whose weight on its tp rank has a side (N or K of its
  // products) below this stays in bf16: its products are too small for fp8 to repay the casts.
  // 0 takes every linear; patterns of the config's own choose exactly the layers they name.
  int64_t min_gemm_size = 1024;

  // The `fp8` section, strictly: unknown keys and bad values name their key path.
  static Fp8Options read(ConfigReader& section);
  // The section as the host passes it (ModelContext::from_c).
  static Fp8Options from_yaml(const std::string& text);
};

}  // namespace triax
