// Every variant of the scan's backward kernel (ScanBackwardVariant, timed side by side by
// mamba_scan_bench) against the LibTorch reference in fp64, through the launchers of
// scan_kernels.hpp: the autograd path (mamba_scan_cuda_test.cpp) runs the default only.
// MambaScanCuda, ctest label gpu; built with -DTRIAX_CUDA=ON, skipped without a GPU.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mamba_scan_test_support.hpp"
#include "reference_scan.hpp"
#include "scan_kernels.hpp"

namespace {

using namespace mamba_scan_test;
namespace k = triax::mamba::kernels;

const c10::Device kVariantsDevice(c10::kCUDA, 0);

k::Dtype kernel_dtype(c10::ScalarType type) { return type == at::kFloat ? k::Dtype::Float32 : k::Dtype::BFloat16; }

// The kernels' operands on the GPU (activations in dtype, parameters fp32) and the fp64 reference
// leaves holding the same values.
struct Operands {
  triax::mamba::SelectiveScanArgs gpu, ref;

  Operands(const ScanShape& shape, c10::ScalarType dtype, uint64_t seed)
      : gpu(scan_inputs(shape, seed, true, true, true)) {
    for (at::Tensor* t : {&gpu.u, &gpu.delta, &gpu.B, &gpu.C, &gpu.z}) *t = t->to(kVariantsDevice, dtype).contiguous();
    for (at::Tensor* t : {&gpu.A, &gpu.D, &gpu.delta_bias}) *t = t->to(kVariantsDevice, at::kFloat).contiguous();
    ref = gpu;
    for (at::Tensor* t : {&ref.u, &ref.delta, &ref.A, &ref.B, &ref.C, &ref.D, &ref.z, &ref.delta_bias})
      *t = t->cpu().to(at::kDouble).requires_grad_(true);
  }

  k::ScanOperands kernel_operands() const {
    k::ScanOperands in{};
    in.dtype = kernel_dtype(gpu.u.scalar_type());
    in.batch = gpu.u.size(0), in.channels = gpu.u.size(1), in.length = gpu.u.size(2), in.state = gpu.A.size(1);
    in.u = gpu.u.const_data_ptr(), in.delta = gpu.delta.const_data_ptr(), in.z = gpu.z.const_data_ptr();
    in.B = gpu.B.const_data_ptr(), in.C = gpu.C.const_data_ptr();
    in.A = gpu.A.const_data_ptr<float>(), in.D = gpu.D.const_data_ptr<float>();
    in.delta_bias = gpu.delta_bias.const_data_ptr<float>();
    in.delta_softplus = true;
    return in;
  }
};

void check_variant(k::ScanBackwardVariant variant, const ScanShape& shape, c10::ScalarType dtype, uint64_t seed) {
  SCOPED_TRACE(std::string(c10::toString(dtype)) + " variant " + std::to_string(static_cast<int>(variant)) + " l" +
               std::to_string(shape.l) + " n" + std::to_string(shape.n));
  Operands o(shape, dtype, seed);
  const k::ScanOperands in = o.kernel_operands();
  const auto f32 = at::TensorOptions().device(kVariantsDevice).dtype(at::kFloat);
  at::Tensor y = at::empty_like(o.gpu.u);
  at::Tensor checkpoints = at::empty({shape.b, shape.d, k::checkpoint_count(shape.l), shape.n}, f32);
  ASSERT_EQ(k::selective_scan_forward(in, nullptr, y.mutable_data_ptr(), nullptr, checkpoints.mutable_data_ptr<float>(),
                                      nullptr),
            cudaSuccess);
  const at::Tensor grad = seeded({shape.b, shape.d, shape.l}, seed + 100).to(kVariantsDevice, dtype);
  at::Tensor du = at::empty_like(o.gpu.u), ddelta = at::empty_like(o.gpu.u), dz = at::empty_like(o.gpu.u);
  at::Tensor dA = at::zeros_like(o.gpu.A), dB = at::zeros(o.gpu.B.sizes(), f32), dC = at::zeros(o.gpu.C.sizes(), f32);
  at::Tensor dD = at::zeros_like(o.gpu.D), dbias = at::zeros_like(o.gpu.delta_bias);
  const k::ScanGradients out{du.mutable_data_ptr(),        ddelta.mutable_data_ptr(),      dz.mutable_data_ptr(),
                             dA.mutable_data_ptr<float>(), dB.mutable_data_ptr<float>(),   dC.mutable_data_ptr<float>(),
                             dD.mutable_data_ptr<float>(), dbias.mutable_data_ptr<float>()};
  ASSERT_EQ(
      k::selective_scan_backward(in, checkpoints.const_data_ptr<float>(), grad.const_data_ptr(), out, nullptr, variant),
      cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  const at::Tensor y_ref = triax::mamba::selective_scan_reference(o.ref, at::Tensor()).first;
  y_ref.backward(grad.cpu().to(at::kDouble));
  const double tolerance = dtype == at::kFloat ? 1e-4 : 2e-2;
  EXPECT_LT(relative_error(y, y_ref), tolerance);
  const std::vector<std::pair<const char*, std::pair<at::Tensor, at::Tensor>>> gradients = {
      {"u", {du, o.ref.u.grad()}}, {"delta", {ddelta, o.ref.delta.grad()}},
      {"A", {dA, o.ref.A.grad()}}, {"B", {dB, o.ref.B.grad()}},
      {"C", {dC, o.ref.C.grad()}}, {"D", {dD, o.ref.D.grad()}},
      {"z", {dz, o.ref.z.grad()}}, {"delta_bias", {dbias, o.ref.delta_bias.grad()}}};
  for (const auto& [name, pair] : gradients)
    EXPECT_LT(relative_error(pair.first, pair.second), tolerance) << "gradient of " << name;
}

TEST(MambaScanCuda, EveryBackwardVariantMatchesReference) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  for (const k::ScanBackwardVariant variant :
       {k::ScanBackwardVariant::kPositionRows, k::ScanBackwardVariant::kStateRows,
        k::ScanBackwardVariant::kStateRowsFactored, k::ScanBackwardVariant::kStoresAfterSpan}) {
    for (const c10::ScalarType dtype : {at::kFloat, at::kBFloat16}) check_variant(variant, {2, 37, 301, 16}, dtype, 1);
    // Every instantiated states-per-thread count, a state size that pads.
    for (const int64_t n : {3, 8, 13, 32}) check_variant(variant, {2, 19, 97, n}, at::kFloat, 10 + n);
  }
}

}  // namespace
