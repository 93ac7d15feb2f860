// Applies a model's tensor map (the triax::HfTensorRule list its plugin gives) between the model's
// whole parameters and Hugging Face tensors, in both directions: RENAME copies, CONCAT splits a
// fused parameter into HF tensors along a dimension (and concatenates them back), STACK unstacks
// a parameter of E experts into E HF tensors, INTERLEAVE cuts a parameter grouped along dim 0 into
// HF tensors of whole parts (one tensor may hold several consecutive parts), IGNORE skips HF tensors matching globs, and an
// optional rule may find its HF tensors absent, or equal to another rule's parameter (a tied
// lm_head.weight). Shapes are checked on the way; every error names the file and the tensor.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "triax/hf_mapping.hpp"
#include "triax/interop/hf_folder.hpp"
#include "triax/interop/safetensors.hpp"

namespace triax::interop {

class TensorMap {
 public:
  // Checks the rules themselves (a CONCAT whose sizes do not add up, a STACK of the wrong count,
  // a name claimed twice, ...); errors name `owner` ("model plugin 'x'").
  TensorMap(std::vector<HfTensorRule> rules, std::string owner);

  struct Weights {
    std::map<std::string, at::Tensor> parameters;  // whole, on the CPU, in the dtype stored
    at::ScalarType dtype;  // the one stored; if several, `declared` or else the one most bytes use
  };
  // Every parameter from `weights`. Names, dtypes (float32, bfloat16, float16) and shapes are
  // checked before any tensor is copied; `config` (the config.json path) is named as what implies
  // the expected shapes. An HF tensor no rule names or ignores is refused.
  Weights read(const HfWeights& weights, const std::string& config,
               std::optional<at::ScalarType> declared = std::nullopt) const;

  struct Tensors {
    std::vector<SafetensorsEntry> entries;        // the HF tensors, in rule order
    std::function<at::Tensor(size_t)> tensor_of;  // entry i from the parameters, in `dtype`
  };
  // The HF tensors of whole `parameters` (exactly those of the map, floating, of its shapes;
  // kept alive by the caller while tensor_of is used), in `dtype`. Errors name `origin`.
  Tensors write(const std::map<std::string, at::Tensor>& parameters, at::ScalarType dtype,
                const std::string& origin) const;

  const std::vector<HfTensorRule>& rules() const { return rules_; }

 private:
  // An optional rule naming a parameter that another rule reads: an alias, never written.
  bool is_alias(const HfTensorRule& rule) const;
  bool ignored(const std::string& hf_name) const;

  std::vector<HfTensorRule> rules_;
  std::string owner_;
};

}  // namespace triax::interop
