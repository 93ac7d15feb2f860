// The fused CUDA scan and conv1d kernels (MambaScanCuda, ctest label gpu; skipped without a GPU)
// against the LibTorch reference evaluated in fp64 from the same input values: outputs, every
// gradient, the last state, in fp32 (1e-4 of the largest reference value) and bf16 (2e-2), at
// lengths that are no multiple of the kernels' pieces, channel counts that are no multiple of
// their blocks, and every state size the kernels instantiate.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/function.h>

#include <string>
#include <vector>

#include "mamba_scan_test_support.hpp"
#include "reference_scan.hpp"
#include "selective_scan.hpp"
#include "triax/layers/fused_ops.hpp"

namespace {

using namespace mamba_scan_test;
using triax::mamba::SelectiveScanArgs;

std::vector<at::Tensor*> operand_list(SelectiveScanArgs& a) {
  return {&a.u, &a.delta, &a.A, &a.B, &a.C, &a.D, &a.z, &a.delta_bias};
}
const char* const kNames[] = {"u", "delta", "A", "B", "C", "D", "z", "delta_bias"};

// args (fp64 CPU) as kernel inputs: activations in dtype, parameters fp32, on the GPU, leaves.
SelectiveScanArgs on_gpu(const SelectiveScanArgs& args, c10::ScalarType dtype) {
  SelectiveScanArgs g = args;
  auto list = operand_list(g);
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i]->defined()) continue;
    const bool parameter = i == 2 || i == 5 || i == 7;
    *list[i] = list[i]->to(kCuda, parameter ? at::kFloat : dtype).detach().requires_grad_(true);
  }
  return g;
}

// The same values in fp64 (after the kernels' rounding), fresh leaves of the reference.
SelectiveScanArgs as_reference(const SelectiveScanArgs& gpu) {
  SelectiveScanArgs r = gpu;
  for (at::Tensor* t : operand_list(r))
    if (t->defined()) *t = t->detach().to(at::kDouble).requires_grad_(true);
  return r;
}

void check_scan(const ScanShape& shape, c10::ScalarType dtype, bool full, uint64_t seed) {
  const std::string where = std::string(c10::toString(dtype)) + " b" + std::to_string(shape.b) + " d" +
                            std::to_string(shape.d) + " l" + std::to_string(shape.l) + " n" + std::to_string(shape.n) +
                            (full ? " D,z,bias" : " bare");
  SCOPED_TRACE(where);
  SelectiveScanArgs args = scan_inputs(shape, seed, full, full, full);
  SelectiveScanArgs gpu = on_gpu(args, dtype);
  SelectiveScanArgs ref = as_reference(gpu);
  const at::Tensor y = triax::mamba::selective_scan(gpu);
  ASSERT_NE(y.grad_fn()->name().find("SelectiveScanFunction"), std::string::npos) << y.grad_fn()->name();
  EXPECT_EQ(y.scalar_type(), dtype);
  const at::Tensor y_ref = triax::mamba::selective_scan_reference(ref, at::Tensor()).first;
  EXPECT_LT(relative_error(y, y_ref), tolerance(dtype));

  const at::Tensor grad = seeded({shape.b, shape.d, shape.l}, seed + 100).to(kCuda, dtype);
  y.backward(grad);
  y_ref.backward(grad.to(at::kDouble));
  auto got = operand_list(gpu), want = operand_list(ref);
  for (size_t i = 0; i < got.size(); ++i) {
    if (!got[i]->defined()) continue;
    ASSERT_TRUE(got[i]->grad().defined()) << kNames[i];
    EXPECT_EQ(got[i]->grad().scalar_type(), got[i]->scalar_type()) << kNames[i];
    EXPECT_LT(relative_error(got[i]->grad(), want[i]->grad()), tolerance(dtype)) << "gradient of " << kNames[i];
  }
}

TEST(MambaScanCuda, ScanMatchesReference) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  ASSERT_TRUE(triax::fused_kernels_enabled());
  for (const c10::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    // 301 positions: no multiple of the forward's 64 or the backward's 32; 37 channels: no
    // multiple of the blocks' 32 and 16.
    check_scan({2, 37, 301, 16}, dtype, true, 1);
    check_scan({2, 37, 301, 16}, dtype, false, 2);
    check_scan({1, 64, 2048, 16}, dtype, true, 3);
    check_scan({3, 5, 1, 16}, dtype, true, 4);
  }
  // Every instantiated states-per-thread count (1, 2, 4, 8), state sizes that pad.
  for (const int64_t n : {3, 8, 13, 24, 32}) check_scan({2, 19, 97, n}, at::kFloat, true, 10 + n);
}

TEST(MambaScanCuda, WithStateMatchesReferenceAndContinues) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  for (const c10::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    const ScanShape shape{2, 40, 203, 16};
    const SelectiveScanArgs args = scan_inputs(shape, 51, true, true, true);
    const SelectiveScanArgs gpu = on_gpu(args, dtype);
    const at::Tensor start = seeded({2, 40, 16}, 57).to(kCuda, at::kFloat);
    const auto [y, state] = triax::mamba::selective_scan_with_state(gpu, start);
    const auto [y_ref, state_ref] = triax::mamba::selective_scan_reference(as_reference(gpu), start.to(at::kDouble));
    EXPECT_LT(relative_error(y, y_ref), tolerance(dtype));
    EXPECT_LT(relative_error(state, state_ref), 1e-4);  // the state stays fp32 whatever the inputs
    EXPECT_EQ(state.scalar_type(), at::kFloat);
    // Split at 77: the second call continues from the first's state.
    auto part = [&](int64_t from, int64_t len) {
      SelectiveScanArgs p = gpu;
      for (at::Tensor* t : {&p.u, &p.delta, &p.z, &p.B, &p.C}) *t = t->detach().narrow(2, from, len).contiguous();
      return p;
    };
    const auto [y1, state1] = triax::mamba::selective_scan_with_state(part(0, 77), start);
    const auto [y2, state2] = triax::mamba::selective_scan_with_state(part(77, 126), state1);
    EXPECT_LT(relative_error(at::cat({y1, y2}, 2), y_ref), tolerance(dtype));
    EXPECT_LT(relative_error(state2, state_ref), 1e-4);
  }
}

// x at a storage offset of one element (`misaligned`) takes the kernels' element loads even where
// the length would allow whole vectors.
at::Tensor conv_input(int64_t length, c10::ScalarType dtype, bool misaligned) {
  const at::Tensor values = seeded({2, 37, length}, 61).to(kCuda, dtype);
  if (!misaligned) return values.requires_grad_(true);
  const at::Tensor storage = at::empty({values.numel() + 1}, values.options());
  at::Tensor x = storage.narrow(0, 1, values.numel()).view(values.sizes());
  x.copy_(values);
  return x.requires_grad_(true);
}

void check_conv(c10::ScalarType dtype, int64_t width, bool silu, bool with_bias, int64_t length = 301,
                bool misaligned = false) {
  SCOPED_TRACE(std::string(c10::toString(dtype)) + " k" + std::to_string(width) + (silu ? " silu" : "") +
               (with_bias ? " bias" : "") + " l" + std::to_string(length) + (misaligned ? " misaligned" : ""));
  const at::Tensor x = conv_input(length, dtype, misaligned);
  const at::Tensor weight = seeded({37, width}, 62, 0.5).to(kCuda, at::kFloat).requires_grad_(true);
  const at::Tensor bias = with_bias ? seeded({37}, 63).to(kCuda, at::kFloat).requires_grad_(true) : at::Tensor();
  const at::Tensor y = triax::mamba::causal_conv1d(x, weight, bias, silu);
  ASSERT_NE(y.grad_fn()->name().find("CausalConv1dFunction"), std::string::npos) << y.grad_fn()->name();
  const at::Tensor x64 = x.detach().to(at::kDouble).requires_grad_(true);
  const at::Tensor w64 = weight.detach().to(at::kDouble).requires_grad_(true);
  const at::Tensor b64 = with_bias ? bias.detach().to(at::kDouble).requires_grad_(true) : at::Tensor();
  const at::Tensor y64 = triax::mamba::causal_conv1d_reference(x64, w64, b64, silu);
  EXPECT_LT(relative_error(y, y64), tolerance(dtype));
  const at::Tensor grad = seeded({2, 37, length}, 64).to(kCuda, dtype);
  y.backward(grad);
  y64.backward(grad.to(at::kDouble));
  EXPECT_LT(relative_error(x.grad(), x64.grad()), tolerance(dtype)) << "gradient of x";
  EXPECT_LT(relative_error(weight.grad(), w64.grad()), tolerance(dtype)) << "gradient of weight";
  if (with_bias) {
    EXPECT_LT(relative_error(bias.grad(), b64.grad()), tolerance(dtype)) << "gradient of bias";
  }
}

TEST(MambaScanCuda, ConvMatchesReference) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  for (const c10::ScalarType dtype : {at::kFloat, at::kBFloat16})
    for (const bool silu : {true, false}) check_conv(dtype, 4, silu, true);
  check_conv(at::kFloat, 4, true, false);
  check_conv(at::kFloat, 1, true, true);
  check_conv(at::kFloat, 8, true, true);
  // Whole vectors: rows that change within a warp (40), rows of whole warps (2048), k 8 and k 2.
  for (const c10::ScalarType dtype : {at::kFloat, at::kBFloat16})
    for (const int64_t length : {8, 40, 2048}) check_conv(dtype, 4, true, true, length);
  check_conv(at::kBFloat16, 8, true, true, 40);
  check_conv(at::kBFloat16, 2, false, true, 2048);
  check_conv(at::kBFloat16, 4, true, true, 40, /*misaligned=*/true);
}

}  // namespace
