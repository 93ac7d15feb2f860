// What the fused-op tests share (fused_ops_test.cpp, fused_linear_cross_entropy_test.cpp).
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace triax::kernel_testing {

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
