#include "newton_schulz.hpp"

#include <ATen/ATen.h>

#include <array>

#include "triax/error.hpp"

namespace triax::plugins {
namespace {

constexpr std::array<NewtonSchulzCoefficients, 2> kCoefficientSets = {{
    {"quintic", 3.4445, -4.7750, 2.0315},
    {"cubic", 1.5, -0.5, 0.0},
}};

// Keeps a zero matrix (a parameter whose gradient was zero) at zero instead of dividing by 0.
constexpr double kNormFloor = 1e-7;

}  // namespace

const NewtonSchulzCoefficients* find_newton_schulz_coefficients(const std::string& name) {
  for (const NewtonSchulzCoefficients& set : kCoefficientSets)
    if (name == set.name) return &set;
  return nullptr;
}

at::Tensor orthogonalise(const at::Tensor& matrices, const NewtonSchulzCoefficients& coefficients, int64_t steps,
                         at::ScalarType compute) {
  if (matrices.dim() != 3)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "orthogonalise: expected [count, rows, cols], got " +
                                                  std::to_string(matrices.dim()) + " dimensions");
  at::NoGradGuard no_grad;
  const bool tall = matrices.size(1) > matrices.size(2);
  const at::Tensor wide = tall ? matrices.transpose(1, 2) : matrices;
  // The norms and the division in fp32, written in `compute` by the division itself: no fp32 copy
  // of the batch (twice its bf16 bytes on a GPU).
  const at::Tensor norms =
      at::linalg_vector_norm(wide, 2, at::IntArrayRef{1, 2}, /*keepdim=*/true, /*dtype=*/at::kFloat);
  at::Tensor x = at::empty(wide.sizes(), wide.options().dtype(compute));
  at::div_out(x, wide, norms + kNormFloor);
  for (int64_t i = 0; i < steps; ++i) {
    const at::Tensor gram = at::bmm(x, x.transpose(1, 2));
    const at::Tensor polynomial = at::baddbmm(gram, gram, gram, /*beta=*/coefficients.b, /*alpha=*/coefficients.c);
    x = at::baddbmm(x, polynomial, x, /*beta=*/coefficients.a, /*alpha=*/1.0);
  }
  return tall ? x.transpose(1, 2).contiguous() : x;
}

}  // namespace triax::plugins
