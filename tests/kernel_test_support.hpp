// What the fused-op tests share (fused_ops_test.cpp, fused_linear_cross_entropy_test.cpp, the fp32
// residual norms' tests).
#pragma once

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace triax::kernel_testing {

// N(0, scale^2) of `shape` on the CPU, drawn in fp64 from `seed`, then cast to dtype.
inline at::Tensor seeded(const std::vector<int64_t>& shape, uint64_t seed, c10::ScalarType dtype, double scale = 1.0) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return (at::randn(shape, generator, at::TensorOptions().dtype(at::kDouble)) * scale).to(dtype);
}

// max |actual - expected| relative to max |expected|, at most `tol`; compared in fp64 on the CPU.
inline void expect_close(const at::Tensor& actual, const at::Tensor& expected, double tol, const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what << ": undefined";
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  const at::Tensor a = actual.detach().to(at::kCPU, at::kDouble), e = expected.detach().to(at::kCPU, at::kDouble);
  const double scale = std::max(e.abs().max().item<double>(), 1e-30);
  const double error = (a - e).abs().max().item<double>() / scale;
  EXPECT_LE(error, tol) << what << ": relative error " << error;
}

}  // namespace triax::kernel_testing
