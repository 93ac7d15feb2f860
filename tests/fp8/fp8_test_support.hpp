// What the fp8 tests share (fp8_linear_test.cpp, fp8_weight_cache_test.cpp,
// fp8_producer_amax_test.cpp, moe_fp8_experts_test.cpp): seeded inputs and a model context with an
// fp8 section.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "triax/fp8.hpp"
#include "triax/model.hpp"

namespace triax::fp8_testing {

inline at::Tensor seeded(std::vector<int64_t> shape, uint64_t seed, double std = 1.0) {
  at::manual_seed(seed);
  return at::randn(shape, at::TensorOptions().dtype(at::kFloat)) * std;
}

// A context whose fp8 section is `yaml` (the section's body, as the config would hold it).
inline ModelContext fp8_context(const std::string& yaml, c10::Device device = at::kCPU,
                                c10::ScalarType dtype = at::kFloat) {
  ModelContext context;
  context.device = device;
  context.dtype = dtype;
  context.fp8 = std::make_shared<const Fp8Options>(Fp8Options::from_yaml(yaml));
  return context;
}

}  // namespace triax::fp8_testing
