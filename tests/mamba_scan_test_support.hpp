// Shared by the scan tests: seeded inputs and an independent evaluation of the recurrence in
// plain double loops (no LibTorch op), the ground truth of the reference and the kernels.
#pragma once

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "selective_scan.hpp"

namespace mamba_scan_test {

inline at::Tensor seeded(const std::vector<int64_t>& shape, uint64_t seed, double scale = 1.0, double shift = 0.0) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn(shape, generator, at::TensorOptions().dtype(at::kDouble)) * scale + shift;
}

struct ScanShape {
  int64_t b, d, l, n;
};

// fp64 CPU inputs of the Mamba ranges: delta around softplus^-1 of 0.01..0.1, A = -exp(A_log).
inline triax::mamba::SelectiveScanArgs scan_inputs(const ScanShape& s, uint64_t seed, bool with_d, bool with_z,
                                                   bool with_bias) {
  triax::mamba::SelectiveScanArgs args;
  args.u = seeded({s.b, s.d, s.l}, seed);
  args.delta = seeded({s.b, s.d, s.l}, seed + 1, 0.5, -3.0);
  args.A = -at::exp(seeded({s.d, s.n}, seed + 2, 0.5, 0.5));
  args.B = seeded({s.b, s.n, s.l}, seed + 3);
  args.C = seeded({s.b, s.n, s.l}, seed + 4);
  if (with_d) args.D = seeded({s.d}, seed + 5);
  if (with_z) args.z = seeded({s.b, s.d, s.l}, seed + 6);
  if (with_bias) args.delta_bias = seeded({s.d}, seed + 7, 0.3);
  return args;
}

inline double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }

// y [b, d, l] and the last state [b, d, n], both fp64, of the recurrence of selective_scan.hpp.
inline std::pair<at::Tensor, at::Tensor> scan_by_loops(const triax::mamba::SelectiveScanArgs& args,
                                                       const at::Tensor& initial_state) {
  auto as64 = [](const at::Tensor& t) { return t.defined() ? t.detach().to(at::kDouble).contiguous() : t; };
  const at::Tensor u = as64(args.u), delta = as64(args.delta), A = as64(args.A), B = as64(args.B), C = as64(args.C),
                   D = as64(args.D), z = as64(args.z), bias = as64(args.delta_bias);
  const int64_t nb = u.size(0), nd = u.size(1), nl = u.size(2), nn = A.size(1);
  at::Tensor y = at::zeros({nb, nd, nl}, at::kDouble);
  at::Tensor state = initial_state.defined() ? as64(initial_state).clone() : at::zeros({nb, nd, nn}, at::kDouble);
  const double *pu = u.data_ptr<double>(), *pdelta = delta.data_ptr<double>(), *pA = A.data_ptr<double>(),
               *pB = B.data_ptr<double>(), *pC = C.data_ptr<double>();
  double *py = y.data_ptr<double>(), *ph = state.data_ptr<double>();
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t c = 0; c < nd; ++c) {
      double* h = ph + (b * nd + c) * nn;
      for (int64_t t = 0; t < nl; ++t) {
        const int64_t at_ = (b * nd + c) * nl + t;
        double dt = pdelta[at_] + (bias.defined() ? bias.data_ptr<double>()[c] : 0.0);
        if (args.delta_softplus) dt = softplus(dt);
        double out = 0.0;
        for (int64_t s = 0; s < nn; ++s) {
          const int64_t bc = (b * nn + s) * nl + t;
          h[s] = std::exp(dt * pA[c * nn + s]) * h[s] + dt * pB[bc] * pu[at_];
          out += pC[bc] * h[s];
        }
        if (D.defined()) out += D.data_ptr<double>()[c] * pu[at_];
        if (z.defined()) {
          const double zv = z.data_ptr<double>()[at_];
          out *= zv / (1.0 + std::exp(-zv));
        }
        py[at_] = out;
      }
    }
  return {y, state};
}

// The conv1d of selective_scan.hpp in loops, fp64.
inline at::Tensor conv_by_loops(const at::Tensor& x_in, const at::Tensor& w_in, const at::Tensor& bias_in, bool silu) {
  const at::Tensor x = x_in.detach().to(at::kDouble).contiguous(), w = w_in.detach().to(at::kDouble).contiguous();
  const at::Tensor bias = bias_in.defined() ? bias_in.detach().to(at::kDouble).contiguous() : bias_in;
  const int64_t nb = x.size(0), nd = x.size(1), nl = x.size(2), k = w.size(1);
  at::Tensor y = at::zeros_like(x);
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t c = 0; c < nd; ++c)
      for (int64_t t = 0; t < nl; ++t) {
        double acc = bias.defined() ? bias.data_ptr<double>()[c] : 0.0;
        for (int64_t j = 0; j < k; ++j) {
          const int64_t src = t - (k - 1) + j;
          if (src >= 0) acc += w.data_ptr<double>()[c * k + j] * x.data_ptr<double>()[(b * nd + c) * nl + src];
        }
        if (silu) acc = acc / (1.0 + std::exp(-acc));
        y.data_ptr<double>()[(b * nd + c) * nl + t] = acc;
      }
  return y;
}

// The kernel tests' device and tolerances: fp32 within 1e-4 and bf16 within 2e-2 of the largest
// reference value.
inline const c10::Device kCuda(c10::kCUDA, 0);
inline double tolerance(c10::ScalarType dtype) { return dtype == at::kFloat ? 1e-4 : 2e-2; }

inline double max_abs(const at::Tensor& t) { return t.numel() ? t.abs().max().item<double>() : 0.0; }

// max |got - want| relative to max |want| (absolute where want is all zeros).
inline double relative_error(const at::Tensor& got, const at::Tensor& want) {
  const double scale = std::max(max_abs(want.to(at::kDouble)), 1e-30);
  return max_abs(got.to(at::kDouble).cpu() - want.to(at::kDouble).cpu()) / scale;
}

}  // namespace mamba_scan_test
