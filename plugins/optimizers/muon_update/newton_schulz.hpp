// Orthogonalisation by a Newton–Schulz iteration, without an SVD: X ← a·X + (b·A + c·A²)·X with
// A = X·Xᵀ. Each step maps every singular value s of X to a·s + b·s³ + c·s⁵ and keeps the
// singular vectors, so a few steps from G / ‖G‖_F bring all of G = U·S·Vᵀ's singular values near 1:
// X ≈ U·Vᵀ, the orthogonal factor of G's polar decomposition, which Muon steps along.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace triax::plugins {

struct NewtonSchulzCoefficients {
  const char* name;
  double a, b, c;
};

// The named sets (optimizer_factory.ns_coefficients):
//   quintic (3.4445, −4.7750, 2.0315): raises small singular values steeply (slope 3.4 at 0), so
//     five steps bring them into about [0.7, 1.2] rather than exactly to 1, which Muon does not need;
//   cubic (1.5, −0.5, 0): the classic iteration, converging to exactly 1, slowly from small values.
// nullptr for another name.
const NewtonSchulzCoefficients* find_newton_schulz_coefficients(const std::string& name);

// `matrices` [k, rows, cols]: k matrices of one shape. Each divided by its Frobenius norm (at least
// its spectral norm, so every singular value starts in [0, 1]), then `steps` steps in `compute`
// (bf16 on GPUs, fp32 on CPUs); a tall matrix iterates transposed, so that A is the smaller Gram
// matrix. Returns the k orthogonalised matrices in `compute`.
at::Tensor orthogonalise(const at::Tensor& matrices, const NewtonSchulzCoefficients& coefficients, int64_t steps,
                         at::ScalarType compute);

}  // namespace triax::plugins
