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
  at::Tensor x = matrices.to(at::kFloat);
  const bool tall = x.size(1) > x.size(2);
  if (tall) x = x.transpose(1, 2);
  const at::Tensor norms = at::linalg_vector_norm(x, 2, at::IntArrayRef{1, 2}, /*keepdim=*/true);
  x = (x / (norms + kNormFloor)).to(compute).contiguous();
  for (int64_t i = 0; i < steps; ++i) {
    const at::Tensor gram = at::bmm(x, x.transpose(1, 2));
    const at::Tensor polynomial = at::baddbmm(gram, gram, gram, /*beta=*/coefficients.b, /*alpha=*/coefficients.c);
    x = at::baddbmm(x, polynomial, x, /*beta=*/coefficients.a, /*alpha=*/1.0);
  }
  return tall ? x.transpose(1, 2).contiguous() : x;
}

}  // namespace triax::plugins
