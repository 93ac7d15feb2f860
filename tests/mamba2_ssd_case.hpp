// The SSD's shape cases of the CUDA kernel tests (mamba2_chunk_scan_v3_test.cpp,
// mamba2_chunk_states_test.cpp) and their element-by-element bound check.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

namespace triax::test {

struct SsdCase {
  int64_t batch, length, heads, head_dim, groups, state, chunk;
  c10::ScalarType operand;
  bool initial;
};

inline std::string name_of(const SsdCase& c) {
  return "b" + std::to_string(c.batch) + " l" + std::to_string(c.length) + " r" + std::to_string(c.heads) + " p" +
         std::to_string(c.head_dim) + " g" + std::to_string(c.groups) + " n" + std::to_string(c.state) + " q" +
         std::to_string(c.chunk) + " " + c10::toString(c.operand) + (c.initial ? " with initial state" : "");
}

// |a - b| <= allowed everywhere, give or take fp32's smallest normal value: where every term is
// zero the bound is zero, yet fp32 sums may carry a subnormal (1.8e-46 measured on an H100).
inline void expect_within(const at::Tensor& a, const at::Tensor& b, const at::Tensor& allowed,
                          const std::string& what) {
  const at::Tensor expected = b.to(at::kDouble).cpu();
  const at::Tensor difference = (a.to(at::kDouble).cpu() - expected).abs();
  ASSERT_GT(expected.abs().max().item<double>(), 0.0) << what << ": nothing to compare";
  EXPECT_LE((difference - allowed).max().item<double>(), static_cast<double>(std::numeric_limits<float>::min()))
      << what << ": largest difference " << difference.max().item<double>() << " against a largest allowed "
      << allowed.max().item<double>();
}

}  // namespace triax::test
