// FP8 training of the SDK's linear layers (docs/fp8.md).
//
// The config's `fp8` section names a scaling recipe and which linears compute in fp8. The host
// hands the section to the model as triax_model_context.fp8_yaml; ModelContext::from_c reads it
// into Fp8Options, and the plugin adapter switches the chosen ColumnParallelLinear and
// RowParallelLinear layers of the freshly built model to fp8 (convert_linears_to_fp8), so model
// code stays as it is. Without the section nothing changes: the linears keep their plain path.
#pragma once

#include <torch/nn/module.h>

#include <string>
#include <vector>

#include "triax/config_reader.hpp"

namespace triax {

struct ModelContext;

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

  // The `fp8` section, strictly: unknown keys and bad values name their key path.
  static Fp8Options read(ConfigReader& section);
  // The section as the host passes it (ModelContext::from_c).
  static Fp8Options from_yaml(const std::string& text);
};

// Whether `name` matches `pattern`, where '*' matches any run of characters.
bool fp8_pattern_matches(const std::string& pattern, const std::string& name);

// Switches every column- and row-parallel linear of `model` whose name matches
// context.fp8->linears to fp8 (nothing when context.fp8 is null). Refuses, naming the key and the
// layer, a CUDA device without fp8 tensor cores and a layer whose dimensions on this rank are not
// multiples of 16.
void convert_linears_to_fp8(torch::nn::Module& model, const ModelContext& context);

}  // namespace triax
