// The chunked SSD's forward and backward timed at state-spaces' mamba2-780m layer shape (48 heads
// of 64 channels, one group, state 128, chunks of 256, sequence 2048), and what one Mamba-2
// layer's forward keeps for its backward at that shape. Built always, not run by ctest.
//   mamba2_ssd_bench [--cuda] [batch [length]]
// CPU (the default): the SSD in fp32, batch 1 unless given; the layer's bytes counted by the CPU
// allocator. --cuda: the SSD with bf16 x, B and C (fp32 dt and A, as the mixer passes them),
// batch 8 unless given; bytes and peaks from the CUDA caching allocator. The layer runs in bf16,
// timed forward and backward. TRIAX_MAMBA2_FUSED_NORM=0 and TRIAX_MAMBA2_SSD_KERNELS=0 time the
// LibTorch compositions the mixer's CUDA kernels replace (TRIAX_MAMBA2_SSD_BACKWARD_FUSED=0 those of
// the SSD backward's elementwise passes alone); TRIAX_MAMBA2_GATED_NORM_KERNEL=v1 the gated
// norm's first kernels; TRIAX_MAMBA2_Y_IN_OPERAND_TYPE=0 the fused chunk scan's y (and dy) in
// fp32; TRIAX_MAMBA2_SCALED_ROWS_KERNEL=0 LibTorch's products for x dt and its weighted copy instead of the scaled rows
// kernel; TRIAX_MAMBA2_SSD_PACKED_GRADIENT=0 the layer's x, B and C gradients as three tensors joined by a cat (the
// layer's timing only: the SSD's own calls ssd_chunked; TRIAX_MAMBA2_SUMMED_ROWS_KERNEL=0 its store of x's through
// LibTorch's add); TRIAX_MAMBA2_STATES_IN_OPERAND_TYPE=0 the state passing's kernels storing the backward's operands in
// fp32 (the entering states, the chunk states' gradient), cast by a copy each.
// With --cuda, everything is timed seven times in one run: the fused chunk scan switched off,
// then on (TRIAX_MAMBA2_CHUNK_SCAN=0, then 1), then on with the token-major conv1d
// (TRIAX_MAMBA2_TOKEN_MAJOR_CONV=1; 0 in the first two), in these three with the chunk scan's
// kernels TRIAX_MAMBA2_CHUNK_SCAN_KERNEL as given (unset: v3), then the third three times more:
// with v3-forward (the forward's v3 beside the backward's v2 kernels), v3-columns (the forward's
// and the columns kernel's v3 beside the WMMA scores kernel) and v3 (all three); then that last one
// once more with TRIAX_MAMBA2_CHUNK_STATES_KERNEL=0 (cuBLAS's chunk states over the stored xdt o w;
// 1, the tensor-core kernels, in all the others).
#include <ATen/ATen.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "cpu_live_bytes.hpp"
#include "mamba2_config.hpp"
#include "mamba2_mixer.hpp"
#include "model_reference_support.hpp"
#include "ssd.hpp"
#include "triax/config_reader.hpp"

#ifdef TRIAX_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace {

using triax::mamba2::SsdInputs;

constexpr int64_t kHeads = 48, kHeadDim = 64, kState = 128, kChunk = 256, kHidden = 1536;

struct Setting {
  at::Device device = at::kCPU;
  int64_t batch = 1, length = 2048;
};

void synchronize(const Setting& s) {
  if (s.device.is_cuda()) torch::cuda::synchronize();
}

// Mean milliseconds of `run` over `iterations` after one warm-up.
double time_ms(const Setting& s, const std::function<void()>& run, int iterations) {
  run();
  synchronize(s);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) run();
  synchronize(s);
  const std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / iterations;
}

// Bytes allocated and alive on the device, and the peak since the last reset (CUDA only).
struct DeviceBytes {
  int64_t current = 0, peak = 0;
};

DeviceBytes device_bytes(const Setting& s, bool reset_peak) {
  DeviceBytes out;
#ifdef TRIAX_WITH_CUDA
  if (s.device.is_cuda()) {
    namespace allocator = c10::cuda::CUDACachingAllocator;
    const auto stats = allocator::getDeviceStats(s.device.index() < 0 ? 0 : s.device.index());
    const auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    out = {stats.allocated_bytes[all].current, stats.allocated_bytes[all].peak};
    if (reset_peak) allocator::resetPeakStats(s.device.index() < 0 ? 0 : s.device.index());
  }
#else
  (void)s, (void)reset_peak;
#endif
  return out;
}

SsdInputs layer_inputs(const Setting& s, bool requires_grad) {
  const bool cuda = s.device.is_cuda();
  const auto operand = at::TensorOptions().device(s.device).dtype(cuda ? at::kBFloat16 : at::kFloat);
  const auto f32 = at::TensorOptions().device(s.device).dtype(at::kFloat);
  SsdInputs in;
  in.x = at::randn({s.batch, s.length, kHeads, kHeadDim}, operand);
  in.dt = at::softplus(at::randn({s.batch, s.length, kHeads}, f32) - 3.0);
  in.A = -at::linspace(1.0, 16.0, kHeads, f32);
  in.B = at::randn({s.batch, s.length, 1, kState}, operand);
  in.C = at::randn({s.batch, s.length, 1, kState}, operand);
  for (at::Tensor* t : {&in.x, &in.dt, &in.A, &in.B, &in.C}) t->requires_grad_(requires_grad);
  return in;
}

void time_ssd(const Setting& s) {
  const int iterations = s.device.is_cuda() ? 20 : 2;
  const SsdInputs in = layer_inputs(s, true);
  const double inference = time_ms(
      s,
      [&] {
        torch::NoGradGuard no_grad;
        triax::mamba2::ssd_chunked(in, kChunk);
      },
      iterations);
  const double training = time_ms(s, [&] { triax::mamba2::ssd_chunked(in, kChunk); }, iterations);
  // dy in y's type, as the gated norm gives it (x's with the fused chunk scan; ssd.hpp).
  const c10::ScalarType y_type = triax::mamba2::ssd_chunked(in, kChunk).y.scalar_type();
  const at::Tensor grad_y = at::randn({s.batch, s.length, kHeads, kHeadDim}, in.dt.options().dtype(y_type));
  const double both = time_ms(
      s, [&] { triax::mamba2::ssd_chunked(in, kChunk).y.backward(grad_y); }, iterations);
  std::printf("ssd forward (no grad)     %9.3f ms\n", inference);
  std::printf("ssd forward (training)    %9.3f ms\n", training);
  std::printf("ssd forward + backward    %9.3f ms  (backward %.3f ms)\n", both, both - training);
  device_bytes(s, true);
  const int64_t before = device_bytes(s, false).current;
  triax::mamba2::ssd_chunked(in, kChunk).y.backward(grad_y);
  synchronize(s);
  if (s.device.is_cuda())
    std::printf("ssd forward + backward: peak %.1f MB above the %.1f MB of inputs\n",
                (device_bytes(s, false).peak - before) / 1e6, before / 1e6);
}

// One Mamba-2 mixer of the 780m shape in bf16, as configs/bench/mamba2-780m.yaml trains it.
std::shared_ptr<triax::mamba2::Mamba2Mixer> layer(const Setting& s) {
  triax::ConfigReader reader = triax::ConfigReader::from_text(
      "hidden_size: 1536\nnum_hidden_layers: 1\nvocab_size: 50280\nnum_heads: 48\nhead_dim: 64\n"
      "state_size: 128\nn_groups: 1\nchunk_size: 256\n",
      "model.model_config");
  triax::ModelContext context = triax::test::tiny_model_context();
  context.device = s.device;
  context.dtype = at::kBFloat16;
  auto mixer =
      std::make_shared<triax::mamba2::Mamba2Mixer>(triax::mamba2::Mamba2Config::read(reader), context);
  torch::NoGradGuard no_grad;
  for (at::Tensor& p : mixer->parameters()) p.normal_(0.0, 0.02);
  return mixer;
}

void measure_layer(const Setting& s) {
  auto mixer = layer(s);
  const at::Tensor hidden =
      at::randn({s.batch, s.length, kHidden}, at::TensorOptions().device(s.device).dtype(at::kBFloat16))
          .requires_grad_(true);
  triax::test::CpuLiveBytes live;
  const int64_t before_cpu = live.bytes(), before_device = device_bytes(s, true).current;
  const at::Tensor out = mixer->forward(hidden);
  synchronize(s);
  const int64_t kept = (s.device.is_cuda() ? device_bytes(s, false).current - before_device
                                           : live.bytes() - before_cpu) - static_cast<int64_t>(out.nbytes());
  const double per_token = static_cast<double>(kept) / static_cast<double>(s.batch * s.length);
  std::printf("one bf16 layer's forward keeps %.1f MB for its backward (%.0f bytes per token, %.2f x b·l·d_inner "
              "bf16 values)\n",
              kept / 1e6, per_token, static_cast<double>(kept) / (s.batch * s.length * kHeads * kHeadDim * 2.0));
  out.sum().backward();
  synchronize(s);
  if (s.device.is_cuda())
    std::printf("one layer's forward + backward: peak %.1f MB above its input\n",
                (device_bytes(s, false).peak - before_device) / 1e6);
  const at::Tensor grad_out = at::randn_like(out);
  const double step = time_ms(s, [&] { mixer->forward(hidden).backward(grad_out); }, s.device.is_cuda() ? 10 : 1);
  std::printf("one layer's forward + backward %9.3f ms\n", step);
}

// Which of the mixer's CUDA kernels this run takes (each switched off by its variable set to 0).
void print_kernel_switches() {
  const std::pair<const char*, const char*> switches[] = {{"TRIAX_FUSED_KERNELS", "on"},
                                                          {"TRIAX_MAMBA2_FUSED_NORM", "on"},
                                                          {"TRIAX_MAMBA2_GATED_NORM_KERNEL", "v2"},
                                                          {"TRIAX_MAMBA2_SSD_KERNELS", "on"},
                                                          {"TRIAX_MAMBA2_CHUNK_SCAN", "on"},
                                                          {"TRIAX_MAMBA2_CHUNK_SCAN_KERNEL", "v3"},
                                                          {"TRIAX_MAMBA2_CHUNK_SCAN_BACKWARD", "on"},
                                                          {"TRIAX_MAMBA2_TOKEN_MAJOR_CONV", "on"},
                                                          {"TRIAX_MAMBA2_Y_IN_OPERAND_TYPE", "on"},
                                                          {"TRIAX_MAMBA2_SSD_BACKWARD_FUSED", "on"},
                                                          {"TRIAX_MAMBA2_SCALED_ROWS_KERNEL", "on"},
                                                          {"TRIAX_MAMBA2_SSD_PACKED_GRADIENT", "on"},
                                                          {"TRIAX_MAMBA2_SUMMED_ROWS_KERNEL", "on"},
                                                          {"TRIAX_MAMBA2_STATES_IN_OPERAND_TYPE", "on"},
                                                          {"TRIAX_MAMBA2_CHUNK_STATES_KERNEL", "off"}};
  for (const auto& [variable, unset] : switches) {
    const char* value = std::getenv(variable);
    std::printf("%s=%s%s\n", variable, value ? value : "(unset: ", value ? "" : (std::string(unset) + ")").c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  Setting s;
  if (!args.empty() && args.front() == "--cuda") {
    if (!torch::cuda::is_available()) {
      std::printf("mamba2_ssd_bench: no GPU, nothing timed\n");
      return 0;
    }
    s.device = at::Device(at::kCUDA, 0);
    s.batch = 8;
    args.erase(args.begin());
  }
  if (args.size() > 0) s.batch = std::atoll(args[0].c_str());
  if (args.size() > 1) s.length = std::atoll(args[1].c_str());
  std::printf("mamba2-780m layer shape: batch %lld, length %lld, %lld heads of %lld, state %lld, chunks of %lld, "
              "%s\n",
              static_cast<long long>(s.batch), static_cast<long long>(s.length), static_cast<long long>(kHeads),
              static_cast<long long>(kHeadDim), static_cast<long long>(kState), static_cast<long long>(kChunk),
              s.device.is_cuda() ? "CUDA, bf16 operands" : "CPU, fp32");
  if (!s.device.is_cuda()) {
    print_kernel_switches();
    time_ssd(s);
    measure_layer(s);
    return 0;
  }
  // All read at every call (ssd_cuda.hpp, token_major_conv_cuda.hpp); a null kernel: as given.
  constexpr const char* kKernel = "TRIAX_MAMBA2_CHUNK_SCAN_KERNEL";
  const char* given = std::getenv(kKernel);
  const std::string given_kernel = given ? given : "";
  struct Switches {
    const char *chunk_scan, *token_major_conv, *kernel, *chunk_states;
  };
  const Switches settings[] = {{"0", "0", nullptr, "1"},      {"1", "0", nullptr, "1"},      {"1", "1", nullptr, "1"},
                               {"1", "1", "v3-forward", "1"}, {"1", "1", "v3-columns", "1"}, {"1", "1", "v3", "1"},
                               {"1", "1", "v3", "0"}};
  for (const Switches& setting : settings) {
    setenv("TRIAX_MAMBA2_CHUNK_SCAN", setting.chunk_scan, 1);
    setenv("TRIAX_MAMBA2_TOKEN_MAJOR_CONV", setting.token_major_conv, 1);
    setenv("TRIAX_MAMBA2_CHUNK_STATES_KERNEL", setting.chunk_states, 1);
    if (setting.kernel)
      setenv(kKernel, setting.kernel, 1);
    else if (given)
      setenv(kKernel, given_kernel.c_str(), 1);
    else
      unsetenv(kKernel);
    std::printf("\n");
    print_kernel_switches();
    time_ssd(s);
    measure_layer(s);
  }
  return 0;
}
