#include "triax/init.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

namespace triax {

uint64_t parameter_seed(uint64_t seed, const std::string& name) {
  // FNV-1a over the name, mixed with the run seed (splitmix64 finaliser).
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  uint64_t z = h ^ (seed + 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void init_normal(const NamedParameter& parameter, double std, uint64_t seed) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(parameter_seed(seed, parameter.name));
  at::Tensor global = at::empty(parameter.spec.global_shape, at::TensorOptions().dtype(at::kFloat));
  global.normal_(0.0, std, generator);
  at::Tensor shard = global;
  for (size_t dim = 0; dim < parameter.spec.global_shape.size(); ++dim)
    shard = shard.narrow(static_cast<int64_t>(dim), parameter.spec.shard_offset[dim], parameter.tensor.size(dim));
  at::NoGradGuard no_grad;
  parameter.tensor.copy_(shard);
}

void init_constant(const NamedParameter& parameter, double value) {
  at::NoGradGuard no_grad;
  parameter.tensor.fill_(value);
}

}  // namespace triax
