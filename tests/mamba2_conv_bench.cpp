// The Mamba-2 mixer's token-major conv1d + SiLU (token_major_conv_cuda.hpp) timed at
// state-spaces' mamba2-780m shape: batch 8 x 2048 tokens, 3328 channels (x, B and C of one group)
// read as a strided view of in_proj's [b, l, 6448] bf16 output. The kernels' loads staged ahead
// (the default) and direct (TRIAX_MAMBA2_CONV_STAGED=0), forward and backward (the partial sums
// of the taps' and the bias's gradients added up included), in ms and in GB/s of the bytes a pass
// must move at least. Built by triax_benches, not run by ctest.
//   mamba2_conv_bench [batch [length]]
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/cuda.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#ifdef TRIAX_WITH_CUDA
#include "gpu_timing.hpp"
#include "token_major_conv_cuda.hpp"
#endif

namespace {

constexpr int64_t kChannels = 3328, kInProjWidth = 6448, kZWidth = 3072, kTaps = 4;

#ifdef TRIAX_WITH_CUDA

void time_loads(const char* staged, int64_t batch, int64_t length) {
  setenv("TRIAX_MAMBA2_CONV_STAGED", staged, 1);
  const auto cuda = at::TensorOptions().device(at::kCUDA);
  const at::Tensor in_proj = at::randn({batch, length, kInProjWidth}, cuda.dtype(at::kBFloat16));
  const at::Tensor weight = (0.5 * at::randn({kChannels, kTaps}, cuda.dtype(at::kFloat))).requires_grad_(true);
  const at::Tensor bias = (0.1 * at::randn({kChannels}, cuda.dtype(at::kFloat))).requires_grad_(true);
  // A leaf at in_proj's strides: its gradient comes back as the kernel writes it, no copy into a slot.
  const at::Tensor x =
      in_proj.narrow(2, kZWidth, kChannels).view({batch, length, 1, kChannels}).detach().requires_grad_(true);
  at::Tensor y;
  const double forward = triax::bench::time_ms([&] {
    at::NoGradGuard no_grad;
    y = triax::mamba2::token_major_conv_cuda(x, weight, bias);
  });
  const at::Tensor grad_y = at::randn({batch, length, kChannels}, cuda.dtype(at::kBFloat16));
  const double backward = triax::bench::time_ms([&] {
                            const at::Tensor out = triax::mamba2::token_major_conv_cuda(x, weight, bias);
                            torch::autograd::grad({out}, {x, weight, bias}, {grad_y});
                          }) -
                          forward;
  // Forward: read x, write y. Backward: read x and grad_y, write grad_x.
  const double bytes = static_cast<double>(batch * length * kChannels) * 2;
  std::printf("conv, loads %s: forward %8.3f ms %7.0f GB/s   backward %8.3f ms %7.0f GB/s\n",
              std::string(staged) == "0" ? "direct" : "staged", forward, 2 * bytes / forward / 1e6, backward,
              3 * bytes / backward / 1e6);
}

#endif

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const int64_t batch = args.size() > 0 ? std::atoll(args[0].c_str()) : 8;
  const int64_t length = args.size() > 1 ? std::atoll(args[1].c_str()) : 2048;
#ifdef TRIAX_WITH_CUDA
  if (torch::cuda::is_available()) {
    std::printf("mamba2-780m conv1d: %lld tokens of %lld channels, width %lld, a view of in_proj's output\n",
                static_cast<long long>(batch * length), static_cast<long long>(kChannels),
                static_cast<long long>(kTaps));
    for (const char* staged : {"0", "1", "0", "1"}) time_loads(staged, batch, length);
    return 0;
  }
#endif
  (void)batch, (void)length;
  std::printf("mamba2_conv_bench: no GPU, nothing timed\n");
  return 0;
}
