// Timing a GPU callable in the benches built beside the tests (fused_ops_bench, fp8_linear_bench).
#pragma once

#include <c10/cuda/CUDAFunctions.h>

#include <chrono>
#include <functional>

namespace triax::bench {

// Milliseconds per call of f (after warm-up), synchronised with the GPU.
inline double time_ms(const std::function<void()>& f, int iterations = 20) {
  for (int i = 0; i < 3; ++i) f();
  c10::cuda::device_synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) f();
  c10::cuda::device_synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / iterations;
}

}  // namespace triax::bench
