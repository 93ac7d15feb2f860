// The Mamba-2 gated norm's CUDA kernels timed at state-spaces' mamba2-780m layer shape: batch 8 x
// 2048 tokens = 16,384 rows of 3072 channels in one group (48 heads of 64), y fp32 (as the SSD
// wrote it) then bf16, x and z bf16 views of one [b, l, 6448] tensor as the mixer splits in_proj's
// output. Each generation of kernels (TRIAX_MAMBA2_GATED_NORM_KERNEL=v1, v2, then v3: v2's forward,
// its own backward) is timed forward and backward (its partial sums of the weight's and D's
// gradients added up included), in ms and in GB/s of the bytes the pass must move at least. Built
// by triax_benches, not run by ctest.
//   mamba2_gated_norm_bench [batch [length]]
#include <ATen/ATen.h>
#include <torch/cuda.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "gated_norm.hpp"

#ifdef TRIAX_WITH_CUDA
#include "gated_norm_cuda.hpp"
#endif

namespace {

constexpr int64_t kHeads = 48, kHeadDim = 64, kInProjWidth = 6448;

#ifdef TRIAX_WITH_CUDA

// Mean milliseconds of `run` over `iterations` after two warm-ups.
double time_ms(const std::function<void()>& run, int iterations) {
  run();
  run();
  torch::cuda::synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) run();
  torch::cuda::synchronize();
  const std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / iterations;
}

triax::mamba2::GatedNormArgs layer_operands(int64_t batch, int64_t length, c10::ScalarType y_type) {
  const int64_t d = kHeads * kHeadDim;
  const auto cuda = at::TensorOptions().device(at::kCUDA);
  const at::Tensor in_proj = at::randn({batch, length, kInProjWidth}, cuda.dtype(at::kBFloat16));
  triax::mamba2::GatedNormArgs a;
  a.z = in_proj.narrow(2, 0, d);
  a.x = in_proj.narrow(2, d, d).view({batch, length, kHeads, kHeadDim});
  a.y = at::randn({batch, length, kHeads, kHeadDim}, cuda.dtype(y_type));
  a.D = at::randn({kHeads}, cuda.dtype(at::kFloat));
  a.weight = 1.0 + 0.1 * at::randn({d}, cuda.dtype(at::kFloat));
  a.groups = 1;
  a.eps = 1e-5;
  return a;
}

void time_kernels(const char* kernel, const triax::mamba2::GatedNormArgs& a) {
  setenv("TRIAX_MAMBA2_GATED_NORM_KERNEL", kernel, 1);
  const int64_t values = a.z.numel();
  const double y_bytes = static_cast<double>(values) * static_cast<double>(a.y.element_size());
  const double bf16_bytes = static_cast<double>(values) * 2;
  // Forward: read y, x, z; write out. Backward: read grad_out, y, x, z; write grad_y, grad_x, grad_z.
  const double forward_bytes = y_bytes + 3 * bf16_bytes, backward_bytes = 2 * y_bytes + 5 * bf16_bytes;
  triax::mamba2::GatedNormOutputs out;
  const double forward = time_ms([&] { out = triax::mamba2::gated_norm_forward_cuda(a); }, 20);
  const at::Tensor grad_out = at::randn_like(out.out);
  const double backward = time_ms([&] { triax::mamba2::gated_norm_backward_cuda(a, out.rstd, grad_out); }, 20);
  std::printf("gated norm %s (runs %s, y %s): forward %8.3f ms %7.0f GB/s   backward %8.3f ms %7.0f GB/s\n", kernel,
              triax::mamba2::gated_norm_kernels_used(a, at::kBFloat16), c10::toString(a.y.scalar_type()), forward,
              forward_bytes / forward / 1e6, backward, backward_bytes / backward / 1e6);
}

#endif

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const int64_t batch = args.size() > 0 ? std::atoll(args[0].c_str()) : 8;
  const int64_t length = args.size() > 1 ? std::atoll(args[1].c_str()) : 2048;
#ifdef TRIAX_WITH_CUDA
  if (torch::cuda::is_available()) {
    std::printf("mamba2-780m gated norm: %lld rows of %lld channels, one group, x and z bf16 views\n",
                static_cast<long long>(batch * length), static_cast<long long>(kHeads * kHeadDim));
    for (const c10::ScalarType y_type : {at::kFloat, at::kBFloat16}) {
      const triax::mamba2::GatedNormArgs a = layer_operands(batch, length, y_type);
      for (const char* kernel : {"v1", "v2", "v3"}) time_kernels(kernel, a);
    }
    return 0;
  }
#endif
  (void)batch, (void)length;
  std::printf("mamba2_gated_norm_bench: no GPU, nothing timed\n");
  return 0;
}
