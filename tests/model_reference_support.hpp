// What the model plugins' reference computations in the tests share: parameters as fp64 tensors
// by name, an RMSNorm in plain ops, and the largest elementwise difference.
#pragma once

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <map>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "triax/causal_lm.hpp"
#include "triax/model.hpp"

namespace triax::test {

// The context a tiny test model is built in: blocks [first_block, last_block) on stage pp_rank of
// pp_size, a fixed seed, and weights large enough (initializer_range 0.5) that every token matters.
inline ModelContext tiny_model_context(int first_block = 0, int last_block = 4, int pp_rank = 0, int pp_size = 1) {
  ModelContext context;
  context.first_block = first_block;
  context.last_block = last_block;
  context.pp_rank = pp_rank;
  context.pp_size = pp_size;
  context.seed = 1234;
  context.init_method = YAML::Load("{initializer_range: 0.5}");
  return context;
}

// Token ids below `vocab`, [rows, length], drawn from `seed`.
inline at::Tensor random_tokens(int64_t rows, int64_t length, uint64_t seed, int64_t vocab = 30) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randint(vocab, {rows, length}, generator, at::kLong);
}

inline double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// max |a - b| / max |b|, in fp64.
inline double max_relative_diff(const at::Tensor& a, const at::Tensor& b) {
  return max_abs_diff(a, b) / b.abs().max().item<double>();
}

// This rank's parameters, detached, in fp64, by name.
inline std::map<std::string, at::Tensor> parameters_of(CausalLm& model) {
  std::map<std::string, at::Tensor> out;
  for (const auto& p : model.parameter_table()) out[p.name] = p.tensor.detach().to(at::kDouble);
  return out;
}

// Parameters whose names hold one of `name_parts` redrawn from N(0, 0.3), in table order from one
// generator seeded `seed`: biases initialised to 0 must still count in a comparison.
inline void randomize_parameters(CausalLm& model, const std::vector<std::string>& name_parts, uint64_t seed) {
  at::NoGradGuard no_grad;
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (const auto& p : model.parameter_table())
    for (const std::string& part : name_parts)
      if (p.name.find(part) != std::string::npos) {
        p.tensor.normal_(0.0, 0.3, generator);
        break;
      }
}

inline at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return x * at::rsqrt(x.pow(2).mean(-1, true) + eps) * weight;
}

}  // namespace triax::test
