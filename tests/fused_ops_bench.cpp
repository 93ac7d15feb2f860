// Fused ops against the LibTorch compositions they replace, forward + backward on one GPU, at the
// shapes of one SmolLM-135M micro-batch (16 x 2048 tokens, bf16): milliseconds per call and, for
// the lm_head + loss, the peak memory. Built only with -DTRIAX_CUDA=ON, not run by ctest:
//
//   fused_ops_bench [--batch B] [--seq S] [--hidden H] [--ffn F] [--heads N] [--kv-heads K] [--vocab V]
#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "gpu_timing.hpp"
#include "triax/layers/cross_entropy.hpp"
#include "triax/layers/fused_linear_cross_entropy.hpp"
#include "triax/layers/fused_ops.hpp"

namespace {

using triax::bench::time_ms;

// Peak bytes allocated while f runs once.
double peak_gib(const std::function<void()>& f) {
  c10::cuda::device_synchronize();
  c10::cuda::CUDACachingAllocator::resetPeakStats(0);
  const auto before = c10::cuda::CUDACachingAllocator::getDeviceStats(0);
  f();
  c10::cuda::device_synchronize();
  const auto after = c10::cuda::CUDACachingAllocator::getDeviceStats(0);
  const size_t all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  return static_cast<double>(after.allocated_bytes[all].peak - before.allocated_bytes[all].current) / (1 << 30);
}

void report(const char* name, double fused, double composition) {
  std::printf("%-28s fused %8.3f ms   composition %8.3f ms   speed-up %5.2fx\n", name, fused, composition,
              composition / fused);
}

at::Tensor leaf(const at::Tensor& t) { return t.detach().requires_grad_(true); }

}  // namespace

int main(int argc, char** argv) {
  int64_t batch = 16, seq = 2048, hidden = 576, ffn = 1536, heads = 9, kv_heads = 3, vocab = 49152;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const int64_t value = std::atoll(argv[i + 1]);
    if (key == "--batch")
      batch = value;
    else if (key == "--seq")
      seq = value;
    else if (key == "--hidden")
      hidden = value;
    else if (key == "--ffn")
      ffn = value;
    else if (key == "--heads")
      heads = value;
    else if (key == "--kv-heads")
      kv_heads = value;
    else if (key == "--vocab")
      vocab = value;
    else {
      std::fprintf(stderr, "unknown option %s\n", key.c_str());
      return 2;
    }
  }
  if (!at::hasCUDA()) {
    std::fprintf(stderr, "fused_ops_bench needs a GPU\n");
    return 1;
  }
  std::printf(
      "tokens %lld, hidden %lld, ffn %lld, heads %lld/%lld, vocab %lld, bf16, forward + backward; "
      "fused kernels %s\n",
      static_cast<long long>(batch * seq), static_cast<long long>(hidden), static_cast<long long>(ffn),
      static_cast<long long>(heads), static_cast<long long>(kv_heads), static_cast<long long>(vocab),
      triax::fused_kernels_enabled() ? "on" : "off (TRIAX_FUSED_KERNELS=0)");
  const auto options = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  const int64_t head_dim = hidden / heads;

  {  // RMSNorm
    at::Tensor x = leaf(at::randn({batch, seq, hidden}, options)), w = leaf(at::ones({hidden}, options));
    at::Tensor g = at::randn({batch, seq, hidden}, options);
    auto fused = [&] { triax::rms_norm(x, w, 1e-5).backward(g); };
    auto composition = [&] {
      at::Tensor x32 = x.to(at::kFloat);
      (x32 * at::rsqrt(x32.pow(2).mean(-1, true) + 1e-5)).to(at::kBFloat16).mul(w).backward(g);
    };
    const double both = time_ms(fused);
    report("rms_norm", both, time_ms(composition));
    // The backward alone, as the difference, and what it moves: grad_y and x read, grad_x written.
    const double backward = both - time_ms([&] { triax::rms_norm(x, w, 1e-5); });
    std::printf("%-28s fused %8.3f ms   %5.2f TB/s of grad_y, x and grad_x\n", "  backward", backward,
                3.0 * static_cast<double>(x.nbytes()) / (backward * 1e9));
  }
  {  // SwiGLU
    at::Tensor gate = leaf(at::randn({batch, seq, ffn}, options)), up = leaf(at::randn({batch, seq, ffn}, options));
    at::Tensor g = at::randn({batch, seq, ffn}, options);
    auto fused = [&] { triax::swiglu(gate, up).backward(g); };
    auto composition = [&] { (at::silu(gate) * up).backward(g); };
    report("swiglu", time_ms(fused), time_ms(composition));
  }
  {  // rotary on q, in attention's layout
    at::Tensor q =
        leaf(at::randn({batch, seq, heads * head_dim}, options).view({batch, seq, heads, head_dim}).transpose(1, 2));
    at::Tensor cos = at::randn({seq, head_dim}, options), sin = at::randn({seq, head_dim}, options);
    at::Tensor g = at::randn({batch, heads, seq, head_dim}, options);
    auto fused = [&] { triax::apply_rotary(q, cos, sin).backward(g); };
    auto composition = [&] {
      const int64_t half = head_dim / 2;
      (q * cos + at::cat({q.narrow(-1, half, half).neg(), q.narrow(-1, 0, half)}, -1) * sin).backward(g);
    };
    report("apply_rotary (q)", time_ms(fused), time_ms(composition));
  }
  {  // lm_head + cross-entropy
    const int64_t tokens = batch * seq;
    at::Tensor h = leaf(at::randn({tokens, hidden}, options));
    at::Tensor w = leaf(at::randn({vocab, hidden}, options) * 0.05);
    at::Tensor labels = at::randint(vocab, {tokens}, at::TensorOptions().device(at::kCUDA).dtype(at::kLong));
    const triax::TensorParallel single;
    auto fused = [&] { triax::fused_linear_cross_entropy(h, w, labels, {}, 0, vocab, single).backward(); };
    auto composition = [&] {
      triax::vocab_parallel_cross_entropy(at::linear(h, w), labels, {}, 0, vocab, single).backward();
    };
    report("lm_head + cross-entropy", time_ms(fused, 5), time_ms(composition, 5));
    auto without_grads = [&](const std::function<void()>& f) {
      h.mutable_grad() = at::Tensor();
      w.mutable_grad() = at::Tensor();
      return peak_gib(f);
    };
    const double fused_peak = without_grads(fused), composition_peak = without_grads(composition);
    std::printf("%-28s fused %8.2f GiB    composition %8.2f GiB (peak above the inputs)\n", "  memory", fused_peak,
                composition_peak);
  }
  return 0;
}
