// A module run as a function of one tensor: the module, for its owner to register, and its
// forward. It lets a layer hold a part whose type the model picks (a causal LM's final norm, a
// decoder layer's MLP) without a common base class for those parts.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <functional>
#include <memory>
#include <utility>

namespace triax {

struct UnaryModule {
  std::shared_ptr<torch::nn::Module> module;
  std::function<at::Tensor(const at::Tensor&)> forward;

  // Any module with `at::Tensor forward(const at::Tensor&)`.
  template <class M>
  static UnaryModule of(std::shared_ptr<M> m) {
    M* raw = m.get();
    return {std::move(m), [raw](const at::Tensor& x) { return raw->forward(x); }};
  }
};

}  // namespace triax
