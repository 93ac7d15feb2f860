// The fused scan and conv1d kernels on one GPU at Mamba-130m shapes (d_inner 1536, n 16, seq
// 2048, batch 8 unless given): each kernel's time and its achieved memory bandwidth, counted as
// the bytes a pass must move (every input read once, every output written once) over the time,
// as a fraction of the GPU's peak. With --peer, mamba-ssm's selective_scan_fn on the same tensors
// beside it (tools/device/mamba_scan_peer.py; mamba-ssm installed by
// tools/device/build_mamba_peer.sh). Built with -DTRIAX_CUDA=ON, not run by ctest.
//   mamba_scan_bench [--peer] [batch channels length state]
//   mamba_scan_bench --step: the decoding step's SSM kernel alone (step_kernels.hpp) at Mamba-130m
//   (dt_rank 48, dt_proj folded in), batch 1 and 32: the lane layout, the thread-per-channel layout
//   with scalar loads and with 16-byte vectors (TRIAX_MAMBA_SSM_STEP_VECTOR's two sides), each
//   the mean of 2,000 steps replayed from CUDA graphs.
// TRIAX_SCAN_BACKWARD_VARIANTS (comma-separated: stores_after_span, state_rows_factored, state_rows,
// position_rows; unset: the default only) times those backward kernels one after the other; the
// comparison with the peer takes the first.
#include <ATen/ATen.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "mamba_scan_peer_times.hpp"
#include "scan_kernels.hpp"
#include "step_kernels.hpp"

namespace {

namespace k = triax::mamba::kernels;

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

// Mean milliseconds of `launch` over `iterations` after `warmup` runs.
double time_ms(const std::function<void()>& launch, int warmup = 3, int iterations = 20) {
  for (int i = 0; i < warmup; ++i) launch();
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  check(cudaEventRecord(start), "record");
  for (int i = 0; i < iterations; ++i) launch();
  check(cudaEventRecord(stop), "record");
  check(cudaEventSynchronize(stop), "synchronize");
  float ms = 0.f;
  check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / iterations;
}

struct Peak {
  double bytes_per_s;
  std::string source;
};

// The peak HBM bandwidth: 4.8 TB/s for an H200 (its data sheet); other GPUs from the memory
// clock and bus width the driver reports (2 transfers per clock).
Peak peak_bandwidth() {
  int device = 0, clock_khz = 0, bus_bits = 0;
  check(cudaGetDevice(&device), "device");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "properties");
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device);
  cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device);
  const double reported = 2.0 * clock_khz * 1e3 * bus_bits / 8.0;
  std::printf("device: %s, memory clock %d kHz, bus %d bits: %.2f TB/s from the driver's numbers\n", prop.name,
              clock_khz, bus_bits, reported / 1e12);
  if (std::strstr(prop.name, "H200")) return {4.8e12, "H200 data sheet, 4.8 TB/s"};
  return {reported, "memory clock x bus width"};
}

void report(const char* name, double ms, double bytes, const Peak& peak) {
  const double rate = bytes / (ms * 1e-3);
  std::printf("%-44s %8.3f ms %9.1f MB %7.2f TB/s %6.1f%% of peak\n", name, ms, bytes / 1e6, rate / 1e12,
              100.0 * rate / peak.bytes_per_s);
}

struct NamedVariant {
  std::string name;
  k::ScanBackwardVariant variant;
};

// The backward variants to time, from TRIAX_SCAN_BACKWARD_VARIANTS (read once, here only).
std::vector<NamedVariant> backward_variants() {
  const std::vector<NamedVariant> known = {{"stores_after_span", k::ScanBackwardVariant::kStoresAfterSpan},
                                           {"state_rows_factored", k::ScanBackwardVariant::kStateRowsFactored},
                                           {"state_rows", k::ScanBackwardVariant::kStateRows},
                                           {"position_rows", k::ScanBackwardVariant::kPositionRows}};
  const char* env = std::getenv("TRIAX_SCAN_BACKWARD_VARIANTS");
  if (env == nullptr || *env == '\0') {
    for (const NamedVariant& v : known)
      if (v.variant == k::kDefaultScanBackward) return {v};
  }
  std::vector<NamedVariant> chosen;
  std::stringstream list(env == nullptr ? "" : env);
  for (std::string name; std::getline(list, name, ',');) {
    bool found = false;
    for (const NamedVariant& v : known)
      if (v.name == name) chosen.push_back(v), found = true;
    if (!found) {
      std::fprintf(stderr, "TRIAX_SCAN_BACKWARD_VARIANTS: unknown variant '%s'\n", name.c_str());
      std::exit(1);
    }
  }
  return chosen;
}

struct ScanTimes {
  double forward_ms, forward_training_ms, backward_ms;
};

// mamba-ssm's times on the same tensors, against triax's `ours`.
void report_peer(const std::map<std::string, at::Tensor>& tensors, const ScanTimes& ours, double forward_bytes,
                 double backward_bytes, const Peak& peak, const std::string& tag) {
  const auto peer = triax::mamba::bench::time_peer_scan(TRIAX_MAMBA_SCAN_PEER_SCRIPT, tensors);
  if (!peer) return;
  report(("peer forward (" + peer->peer + ", no grad)" + tag).c_str(), peer->forward_ms, forward_bytes, peak);
  report(("peer forward (training)" + tag).c_str(), peer->forward_training_ms, forward_bytes, peak);
  report(("peer backward" + tag).c_str(), peer->backward_ms, backward_bytes, peak);
  std::printf("  triax / peer time: forward %.2f, forward (training) %.2f, backward %.2f\n",
              ours.forward_ms / peer->forward_ms, ours.forward_training_ms / peer->forward_training_ms,
              ours.backward_ms / peer->backward_ms);
}

void bench_dtype(c10::ScalarType type, int64_t b, int64_t d, int64_t l, int64_t n, const Peak& peak, bool peer,
                 const std::vector<NamedVariant>& variants) {
  const auto act = at::TensorOptions().device(at::kCUDA).dtype(type);
  const auto f32 = at::TensorOptions().device(at::kCUDA).dtype(at::kFloat);
  const double es = static_cast<double>(c10::elementSize(type));
  at::Tensor u = at::randn({b, d, l}, act), delta = at::randn({b, d, l}, act) * 0.5 - 3.0,
             z = at::randn({b, d, l}, act);
  at::Tensor B = at::randn({b, n, l}, act), C = at::randn({b, n, l}, act);
  at::Tensor A = -at::exp(at::randn({d, n}, f32) * 0.5 + 0.5), D = at::randn({d}, f32), bias = at::randn({d}, f32);
  at::Tensor y = at::empty_like(u), grad_y = at::randn({b, d, l}, act);
  at::Tensor checkpoints = at::empty({b, d, k::checkpoint_count(l), n}, f32);
  at::Tensor du = at::empty_like(u), ddelta = at::empty_like(u), dz = at::empty_like(u);
  at::Tensor dA = at::zeros({d, n}, f32), dB = at::zeros({b, n, l}, f32), dC = at::zeros({b, n, l}, f32);
  at::Tensor dD = at::zeros({d}, f32), dbias = at::zeros({d}, f32);
  const k::Dtype dtype = type == at::kFloat ? k::Dtype::Float32 : k::Dtype::BFloat16;
  const k::ScanOperands in{dtype,
                           b,
                           d,
                           l,
                           n,
                           u.const_data_ptr(),
                           delta.const_data_ptr(),
                           B.const_data_ptr(),
                           C.const_data_ptr(),
                           z.const_data_ptr(),
                           A.const_data_ptr<float>(),
                           D.const_data_ptr<float>(),
                           bias.const_data_ptr<float>(),
                           true};
  const k::ScanGradients out{du.mutable_data_ptr(),        ddelta.mutable_data_ptr(),      dz.mutable_data_ptr(),
                             dA.mutable_data_ptr<float>(), dB.mutable_data_ptr<float>(),   dC.mutable_data_ptr<float>(),
                             dD.mutable_data_ptr<float>(), dbias.mutable_data_ptr<float>()};
  const double rows = static_cast<double>(b * d * l), states = static_cast<double>(b * n * l);
  const double checkpoint_bytes = static_cast<double>(checkpoints.numel()) * 4;
  const std::string tag = std::string(" ") + c10::toString(type);

  // Forward: u, delta, z, B, C in, y out.
  const double forward_bytes = (4 * rows + 2 * states) * es;
  const double inference = time_ms([&] {
    check(k::selective_scan_forward(in, nullptr, y.mutable_data_ptr(), nullptr, nullptr, nullptr), "forward");
  });
  report(("scan forward (inference)" + tag).c_str(), inference, forward_bytes, peak);
  const double training = time_ms([&] {
    check(k::selective_scan_forward(in, nullptr, y.mutable_data_ptr(), nullptr, checkpoints.mutable_data_ptr<float>(),
                                    nullptr),
          "forward");
  });
  report(("scan forward (training, +checkpoints)" + tag).c_str(), training, forward_bytes, peak);
  // Backward: u, delta, z, grad_y, B, C, checkpoints in; du, ddelta, dz, dB, dC (fp32) out.
  const double backward_bytes = (7 * rows + 2 * states) * es + 2 * states * 4 + checkpoint_bytes;
  double backward = 0.0;
  for (size_t i = 0; i < variants.size(); ++i) {
    const double ms = time_ms([&] {
      check(k::selective_scan_backward(in, checkpoints.const_data_ptr<float>(), grad_y.const_data_ptr(), out, nullptr,
                                       variants[i].variant),
            "backward");
    });
    report(("scan backward (" + variants[i].name + ")" + tag).c_str(), ms, backward_bytes, peak);
    if (i == 0) backward = ms;
  }
  std::printf(
      "  (checkpoints: %.1f MB written by the training forward, read by the backward; counted in the "
      "backward's bytes only)\n",
      checkpoint_bytes / 1e6);
  if (peer)
    report_peer({{"u", u},
                 {"delta", delta},
                 {"z", z},
                 {"B", B},
                 {"C", C},
                 {"A", A},
                 {"D", D},
                 {"delta_bias", bias},
                 {"grad_y", grad_y}},
                {inference, training, backward}, forward_bytes, backward_bytes, peak, tag);

  // Conv1d, width 4: x in, y out; backward x, grad_y in, grad_x out.
  at::Tensor w = at::randn({d, 4}, f32);
  const double conv_forward = time_ms([&] {
    check(k::causal_conv1d_forward(dtype, u.const_data_ptr(), w.const_data_ptr<float>(), bias.const_data_ptr<float>(),
                                   y.mutable_data_ptr(), b, d, l, 4, true, nullptr),
          "conv forward");
  });
  report(("conv1d forward (k 4, SiLU)" + tag).c_str(), conv_forward, 2 * rows * es, peak);
  at::Tensor dw = at::empty({d, 4}, f32);
  const double conv_backward = time_ms([&] {
    check(k::causal_conv1d_backward(dtype, u.const_data_ptr(), w.const_data_ptr<float>(), bias.const_data_ptr<float>(),
                                    grad_y.const_data_ptr(), du.mutable_data_ptr(), dw.mutable_data_ptr<float>(),
                                    dbias.mutable_data_ptr<float>(), b, d, l, 4, true, nullptr),
          "conv backward");
  });
  report(("conv1d backward (k 4, SiLU)" + tag).c_str(), conv_backward, 3 * rows * es, peak);
}

// Mean milliseconds of one step, the steps replayed from a CUDA graph of kGraphSteps launches (as
// the decoding step runs them), so that a few-microsecond kernel is not timed by its launches.
double graphed_step_ms(const k::SsmStepOperands& in, at::Tensor& state, at::Tensor& y) {
  constexpr int kGraphSteps = 100;
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "stream");  // blocking: ordered with time_ms's events on stream 0
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "capture");
  for (int i = 0; i < kGraphSteps; ++i)
    check(k::ssm_state_step(in, state.mutable_data_ptr<float>(), y.mutable_data_ptr(), stream), "step");
  cudaGraph_t graph;
  cudaGraphExec_t replay;
  check(cudaStreamEndCapture(stream, &graph), "end capture");
  check(cudaGraphInstantiate(&replay, graph, 0), "instantiate");
  const double ms = time_ms([&] { check(cudaGraphLaunch(replay, stream), "replay"); }, 3, 20) / kGraphSteps;
  check(cudaStreamSynchronize(stream), "synchronize");
  cudaGraphExecDestroy(replay);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  return ms;
}

// One SSM step of `rows` tokens at d_inner d, state n, dt_rank r, the operands laid out as the mixer
// passes them: dt, B, C as parts of x_proj's [rows, r + 2n] output, z the second half of [rows, 2d].
void bench_step(c10::ScalarType type, int64_t rows, int64_t d, int64_t n, int64_t r, const Peak& peak) {
  const auto act = at::TensorOptions().device(at::kCUDA).dtype(type);
  const double es = static_cast<double>(c10::elementSize(type));
  const at::Tensor projected = at::randn({rows, r + 2 * n}, act), xz = at::randn({rows, 2 * d}, act);
  const at::Tensor u = at::randn({rows, d}, act), A_log = at::randn({d, n}, act) * 0.5 + 0.5;
  const at::Tensor D = at::randn({d}, act), bias = at::randn({d}, act) * 0.3 - 3.0;
  const at::Tensor weight = at::randn({d, r}, act) / std::sqrt(static_cast<double>(r));
  at::Tensor state = at::zeros({rows, d, n}, act.dtype(at::kFloat)), y = at::empty({rows, d}, act);
  k::SsmStepOperands in{type == at::kFloat ? k::Dtype::Float32 : k::Dtype::BFloat16,
                        rows,
                        d,
                        n,
                        u.const_data_ptr(),
                        nullptr,
                        xz.narrow(1, d, d).const_data_ptr(),
                        xz.stride(0),
                        projected.narrow(1, r, n).const_data_ptr(),
                        projected.narrow(1, r + n, n).const_data_ptr(),
                        projected.stride(0),
                        A_log.const_data_ptr(),
                        D.const_data_ptr(),
                        bias.const_data_ptr(),
                        projected.const_data_ptr(),
                        projected.stride(0),
                        r,
                        weight.const_data_ptr()};
  // The state read and written, x_proj's row, u, z and y, and the parameters.
  const double bytes = rows * (d * n * 8.0 + (r + 2 * n + 3 * d) * es) + d * (n + r + 2) * es;
  const struct {
    const char* name;
    bool thread_per_channel, vector_loads;
  } layouts[] = {{"lane per state", false, false},
                 {"thread per channel, scalar loads", true, false},
                 {"thread per channel, 16-byte vectors", true, true}};
  for (const auto& layout : layouts) {
    in.thread_per_channel = layout.thread_per_channel;
    in.vector_loads = layout.vector_loads;
    if (layout.vector_loads && !k::ssm_state_step_vectorizes(in, state.data_ptr<float>())) {
      std::fprintf(stderr, "mamba_scan_bench --step: the vectors do not apply to these operands\n");
      std::exit(1);
    }
    const double ms = graphed_step_ms(in, state, y);
    std::printf("SSM step, %-40s batch %2lld %-9s %8.2f us %6.1f MB %5.1f%% of peak\n", layout.name,
                static_cast<long long>(rows), c10::toString(type), ms * 1e3, bytes / 1e6,
                100.0 * bytes / (ms * 1e-3) / peak.bytes_per_s);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args.front() == "--step") {
    if (!at::hasCUDA()) return std::fprintf(stderr, "mamba_scan_bench: no GPU\n"), 1;
    const Peak peak = peak_bandwidth();
    for (const c10::ScalarType type : {at::kBFloat16, at::kFloat})
      for (const int64_t rows : {1, 32}) bench_step(type, rows, 1536, 16, 48, peak);
    check(cudaDeviceSynchronize(), "synchronize");
    return 0;
  }
  const bool peer = !args.empty() && args.front() == "--peer";
  if (peer) args.erase(args.begin());
  auto arg = [&](size_t i, int64_t fallback) { return args.size() > i ? std::atoll(args[i].c_str()) : fallback; };
  const int64_t b = arg(0, 8), d = arg(1, 1536), l = arg(2, 2048), n = arg(3, 16);
  if (!at::hasCUDA()) {
    std::fprintf(stderr, "mamba_scan_bench: no GPU\n");
    return 1;
  }
  const Peak peak = peak_bandwidth();
  std::printf("peak used: %.2f TB/s (%s); shapes b %lld, d %lld, l %lld, n %lld\n", peak.bytes_per_s / 1e12,
              peak.source.c_str(), static_cast<long long>(b), static_cast<long long>(d), static_cast<long long>(l),
              static_cast<long long>(n));
  // What a plain device-to-device copy reaches, for scale.
  at::Tensor src = at::empty({int64_t{1} << 28}, at::TensorOptions().device(at::kCUDA).dtype(at::kFloat));
  at::Tensor dst = at::empty_like(src);
  const double copy = time_ms([&] { dst.copy_(src); });
  report("device-to-device copy (1 GiB)", copy, 2.0 * src.numel() * 4, peak);
  const std::vector<NamedVariant> variants = backward_variants();
  for (const c10::ScalarType type : {at::kBFloat16, at::kFloat}) bench_dtype(type, b, d, l, n, peak, peer, variants);
  check(cudaDeviceSynchronize(), "synchronize");
  return 0;
}
