// The fused ops (triax/layers/fused_ops.hpp) against the plain LibTorch composition evaluated in
// fp64 from the same inputs: outputs and the gradients of every input (the RMSNorm weight too;
// the residual add fused before RMSNorm with both of its outputs differentiated),
// in fp32 (1e-5 of the largest reference value) and bf16/fp16 (1e-2), at the SmolLM hidden sizes,
// a small odd size (no vector path), row counts that are not a multiple of any block, strided and
// misaligned operands; rotary_qkv (rotary_qkv.hpp) against the same composition on the split
// q/k/v projection. FusedOpsCpu runs everywhere (the CPU path is the composition itself);
// FusedOpsCuda (ctest label gpu) runs the CUDA kernels and skips without a GPU.
#include "triax/layers/fused_ops.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>  // Node::name: which autograd function ran

#include <string>
#include <utility>
#include <vector>

#include "kernel_test_support.hpp"
#include "triax/error.hpp"
#include "triax/layers/recomputed_activation.hpp"
#include "triax/layers/rotary_qkv.hpp"

namespace {

constexpr double kEps = 1e-5;
const int64_t kHiddenSizes[] = {576, 960, 2048, 37};  // SmolLM 135M, 360M, 1.7B; odd

at::Tensor seeded(const std::vector<int64_t>& shape, uint64_t seed, c10::ScalarType dtype, c10::Device device,
                  double scale = 1.0, double shift = 0.0) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return (at::randn(shape, generator, at::TensorOptions().dtype(at::kDouble)) * scale + shift).to(device, dtype);
}

at::Tensor leaf(const at::Tensor& t) { return t.detach().requires_grad_(true); }
// The same values in fp64, a fresh leaf of the reference computation.
at::Tensor leaf64(const at::Tensor& t) { return t.detach().to(at::kDouble).requires_grad_(true); }

double tolerance(c10::ScalarType dtype) { return dtype == at::kFloat ? 1e-5 : 1e-2; }

std::string where(c10::Device device, c10::ScalarType dtype, const std::vector<int64_t>& shape) {
  std::string text = device.str() + " " + c10::toString(dtype) + " [";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

// max |actual - expected| <= tol * max |expected|.
using triax::kernel_testing::expect_close;

// The autograd node of a fused op's output: the kernel's own function on CUDA.
void expect_kernel(const at::Tensor& y, const char* function) {
  ASSERT_TRUE(y.grad_fn()) << function;
  EXPECT_NE(y.grad_fn()->name().find(function), std::string::npos)
      << "expected the CUDA kernel's " << function << ", ran " << y.grad_fn()->name();
}

// ---- the references: the plain compositions, in fp64 -----------------------------------------

at::Tensor reference_rms_norm(const at::Tensor& x, const at::Tensor& weight) {
  return x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + kEps) * weight;
}

at::Tensor reference_swiglu(const at::Tensor& gate, const at::Tensor& up) { return at::silu(gate) * up; }

at::Tensor reference_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  return x * cos + at::cat({x.narrow(-1, half, half).neg(), x.narrow(-1, 0, half)}, -1) * sin;
}

// ---- the checks, on any device ---------------------------------------------------------------

// x may be given (a strided view, say); otherwise a fresh [shape] tensor.
void check_rms_norm(c10::Device device, c10::ScalarType dtype, const std::vector<int64_t>& shape,
                    at::Tensor x_values = {}) {
  const std::string what = "rms_norm " + where(device, dtype, shape);
  const int64_t hidden = shape.back();
  if (!x_values.defined()) x_values = seeded(shape, 1, dtype, device, 2.0);
  const at::Tensor w_values = seeded({hidden}, 2, dtype, device, 0.5, 1.0);
  const at::Tensor grad = seeded(shape, 3, dtype, device);

  at::Tensor x = leaf(x_values), w = leaf(w_values);
  at::Tensor y = triax::rms_norm(x, w, kEps);
  if (device.is_cuda()) expect_kernel(y, "RmsNormFunction");
  EXPECT_EQ(y.scalar_type(), dtype);
  y.backward(grad);

  at::Tensor rx = leaf64(x_values), rw = leaf64(w_values);
  at::Tensor ry = reference_rms_norm(rx, rw);
  ry.backward(grad.to(at::kDouble));

  expect_close(y, ry, tolerance(dtype), what + " output");
  expect_close(x.grad(), rx.grad(), tolerance(dtype), what + " input gradient");
  expect_close(w.grad(), rw.grad(), tolerance(dtype), what + " weight gradient");
}

// h = x + y, then the norm of h; both outputs take a gradient (h's as the residual stream's would).
void check_add_rms_norm(c10::Device device, c10::ScalarType dtype, const std::vector<int64_t>& shape) {
  const std::string what = "add_rms_norm " + where(device, dtype, shape);
  const at::Tensor x_values = seeded(shape, 4, dtype, device, 2.0), y_values = seeded(shape, 5, dtype, device);
  const at::Tensor w_values = seeded({shape.back()}, 6, dtype, device, 0.5, 1.0);
  const at::Tensor grad_sum = seeded(shape, 7, dtype, device), grad_normed = seeded(shape, 8, dtype, device);

  at::Tensor x = leaf(x_values), y = leaf(y_values), w = leaf(w_values);
  const auto [sum, normed] = triax::add_rms_norm(x, y, w, kEps);
  if (device.is_cuda()) expect_kernel(normed, "AddRmsNormFunction");
  EXPECT_EQ(normed.scalar_type(), dtype);
  torch::autograd::backward({sum, normed}, {grad_sum, grad_normed});

  at::Tensor rx = leaf64(x_values), ry = leaf64(y_values), rw = leaf64(w_values);
  const at::Tensor rsum = rx + ry, rnormed = reference_rms_norm(rsum, rw);
  torch::autograd::backward({rsum, rnormed}, {grad_sum.to(at::kDouble), grad_normed.to(at::kDouble)});

  expect_close(sum, rsum, tolerance(dtype), what + " sum");
  expect_close(normed, rnormed, tolerance(dtype), what + " output");
  expect_close(x.grad(), rx.grad(), tolerance(dtype), what + " gradient of x");
  expect_close(y.grad(), ry.grad(), tolerance(dtype), what + " gradient of y");
  expect_close(w.grad(), rw.grad(), tolerance(dtype), what + " weight gradient");
}

// gate_values/up_values may be given (misaligned views, say); otherwise fresh [shape] tensors.
void check_swiglu(c10::Device device, c10::ScalarType dtype, const std::vector<int64_t>& shape,
                  at::Tensor gate_values = {}, at::Tensor up_values = {}) {
  const std::string what = "swiglu " + where(device, dtype, shape);
  if (!gate_values.defined()) gate_values = seeded(shape, 11, dtype, device, 3.0);
  if (!up_values.defined()) up_values = seeded(shape, 12, dtype, device);
  const at::Tensor grad = seeded(shape, 13, dtype, device);

  at::Tensor gate = leaf(gate_values), up = leaf(up_values);
  at::Tensor y = triax::swiglu(gate, up);
  if (device.is_cuda()) expect_kernel(y, "SwigluFunction");
  y.backward(grad);

  at::Tensor rgate = leaf64(gate_values), rup = leaf64(up_values);
  at::Tensor ry = reference_swiglu(rgate, rup);
  ry.backward(grad.to(at::kDouble));

  expect_close(y, ry, tolerance(dtype), what + " output");
  expect_close(gate.grad(), rgate.grad(), tolerance(dtype), what + " gate gradient");
  expect_close(up.grad(), rup.grad(), tolerance(dtype), what + " up gradient");
}

// gate and up as the halves of one [..., 2n] tensor (the fused gate/up GEMM's output); gate_up may
// be given (a strided view, say). The gradient comes back in gate_up's layout.
void check_swiglu_halves(c10::Device device, c10::ScalarType dtype, const std::vector<int64_t>& shape,
                         at::Tensor gate_up_values = {}) {
  const std::string what = "swiglu_halves " + where(device, dtype, shape);
  if (!gate_up_values.defined()) gate_up_values = seeded(shape, 16, dtype, device, 3.0);
  std::vector<int64_t> out_shape = shape;
  out_shape.back() /= 2;
  const at::Tensor grad = seeded(out_shape, 17, dtype, device);

  at::Tensor gate_up = leaf(gate_up_values);
  at::Tensor y = triax::swiglu_halves(gate_up);
  if (device.is_cuda()) expect_kernel(y, "SwigluHalvesFunction");
  y.backward(grad);

  const int64_t n = shape.back() / 2;
  at::Tensor rgate = leaf64(gate_up_values.narrow(-1, 0, n)), rup = leaf64(gate_up_values.narrow(-1, n, n));
  at::Tensor ry = reference_swiglu(rgate, rup);
  ry.backward(grad.to(at::kDouble));

  expect_close(y, ry, tolerance(dtype), what + " output");
  ASSERT_EQ(gate_up.grad().sizes(), gate_up.sizes()) << what;
  expect_close(gate_up.grad().narrow(-1, 0, n), rgate.grad(), tolerance(dtype), what + " gate gradient");
  expect_close(gate_up.grad().narrow(-1, n, n), rup.grad(), tolerance(dtype), what + " up gradient");
}

// cos and sin tables like RotaryEmbedding's: angles position * frequency, duplicated over the halves.
std::pair<at::Tensor, at::Tensor> rotary_tables(int64_t seq, int64_t head_dim, c10::ScalarType dtype,
                                                c10::Device device) {
  const at::Tensor positions = at::arange(seq, at::TensorOptions().dtype(at::kDouble));
  const at::Tensor frequencies = at::pow(10000.0, -at::arange(0, head_dim, 2, at::kDouble) / head_dim);
  at::Tensor angles = at::outer(positions, frequencies);
  angles = at::cat({angles, angles}, -1);
  return {angles.cos().to(device, dtype), angles.sin().to(device, dtype)};
}

// [batch, heads, seq, head_dim]; attention_layout: x is a transposed view of [batch, seq, heads *
// head_dim] storage, as attention's projections give it.
void check_rotary(c10::Device device, c10::ScalarType dtype, const std::vector<int64_t>& shape, bool attention_layout) {
  const std::string what =
      "apply_rotary " + where(device, dtype, shape) + (attention_layout ? " (attention layout)" : "");
  const int64_t batch = shape[0], heads = shape[1], seq = shape[2], head_dim = shape[3];
  at::Tensor x_values = attention_layout ? seeded({batch, seq, heads * head_dim}, 21, dtype, device)
                                               .view({batch, seq, heads, head_dim})
                                               .transpose(1, 2)
                                         : seeded(shape, 21, dtype, device);
  const auto [cos, sin] = rotary_tables(seq, head_dim, dtype, device);
  const at::Tensor grad = seeded(shape, 22, dtype, device);

  at::Tensor x = leaf(x_values);
  at::Tensor y = triax::apply_rotary(x, cos, sin);
  if (device.is_cuda()) expect_kernel(y, "RotaryFunction");
  y.backward(grad);

  at::Tensor rx = leaf64(x_values);
  at::Tensor ry = reference_rotary(rx, cos.to(at::kDouble), sin.to(at::kDouble));
  ry.backward(grad.to(at::kDouble));

  expect_close(y, ry, tolerance(dtype), what + " output");
  expect_close(x.grad(), rx.grad(), tolerance(dtype), what + " input gradient");
}

// The fused q/k/v projection's output [batch, seq, kv_heads, group + 2, head_dim] through
// rotary_qkv, against the split parts through the fp64 reference: q, k and v, and the one gradient
// of qkv. Without `k_used` the loss ignores k: its part of the gradient is zero.
void check_rotary_qkv(c10::Device device, c10::ScalarType dtype, const std::vector<int64_t>& shape,
                      bool k_used = true) {
  const std::string what = "rotary_qkv " + where(device, dtype, shape) + (k_used ? "" : " (k unused)");
  const int64_t batch = shape[0], seq = shape[1], kv_heads = shape[2], group = shape[3] - 2, head_dim = shape[4];
  const at::Tensor qkv_values = seeded(shape, 23, dtype, device);
  const auto [cos, sin] = rotary_tables(seq, head_dim, dtype, device);
  const at::Tensor grad_q = seeded({batch, kv_heads * group, seq, head_dim}, 24, dtype, device);
  const at::Tensor grad_k = seeded({batch, kv_heads, seq, head_dim}, 25, dtype, device);
  const at::Tensor grad_v = seeded({batch, kv_heads, seq, head_dim}, 26, dtype, device);

  at::Tensor qkv = leaf(qkv_values);
  const auto [q, k, v] = triax::rotary_qkv(qkv, cos, sin);
  if (device.is_cuda()) expect_kernel(q, "RotaryQkvFunction");
  // q and k in [batch, seq, heads, head_dim] storage, as attention's projections give them: the
  // attention output follows q's layout, and o_proj takes it without a copy.
  EXPECT_EQ(q.stride(2), kv_heads * group * head_dim) << what;
  EXPECT_EQ(k.stride(2), kv_heads * head_dim) << what;
  // The kernel copies v into that layout too (the composition makes it contiguous).
  if (device.is_cuda()) {
    EXPECT_EQ(v.stride(2), kv_heads * head_dim) << what;
  }
  at::Tensor loss = (q * grad_q).sum() + (v * grad_v).sum();
  if (k_used) loss = loss + (k * grad_k).sum();
  loss.backward();

  at::Tensor rqkv = leaf64(qkv_values);
  const at::Tensor c64 = cos.to(at::kDouble), s64 = sin.to(at::kDouble);
  auto heads = [&](int64_t first, int64_t count) {  // [batch, count x kv_heads, seq, head_dim]
    return rqkv.narrow(3, first, count).reshape({batch, seq, kv_heads * count, head_dim}).transpose(1, 2);
  };
  const at::Tensor rq = reference_rotary(heads(0, group), c64, s64), rk = reference_rotary(heads(group, 1), c64, s64);
  const at::Tensor rv = heads(group + 1, 1);
  at::Tensor reference_loss = (rq * grad_q.to(at::kDouble)).sum() + (rv * grad_v.to(at::kDouble)).sum();
  if (k_used) reference_loss = reference_loss + (rk * grad_k.to(at::kDouble)).sum();
  reference_loss.backward();

  expect_close(q, rq, tolerance(dtype), what + " q");
  expect_close(k, rk, tolerance(dtype), what + " k");
  expect_close(v, rv, tolerance(dtype), what + " v");
  expect_close(qkv.grad(), rqkv.grad(), tolerance(dtype), what + " qkv gradient");
  // v and its gradient are copies: exact.
  EXPECT_TRUE(at::equal(v, qkv_values.select(3, group + 1).transpose(1, 2))) << what << " v";
  EXPECT_TRUE(at::equal(qkv.grad().select(3, group + 1), grad_v.transpose(1, 2))) << what << " v gradient";
  if (!k_used) {
    EXPECT_EQ(qkv.grad().select(3, group).abs().max().item<double>(), 0.0) << what;
  }
}

bool has_gpu() { return at::hasCUDA(); }

const c10::Device kCpu(c10::kCPU);
const c10::Device kCuda(c10::kCUDA, 0);

// ---- CPU: the composition --------------------------------------------------------------------

TEST(FusedOpsCpu, RmsNormMatchesComposition) {
  for (c10::ScalarType dtype : {at::kFloat, at::kBFloat16})
    for (int64_t hidden : kHiddenSizes) check_rms_norm(kCpu, dtype, {3, 7, hidden});
}

TEST(FusedOpsCpu, AddRmsNormMatchesComposition) {
  for (c10::ScalarType dtype : {at::kFloat, at::kBFloat16})
    for (int64_t hidden : kHiddenSizes) check_add_rms_norm(kCpu, dtype, {3, 7, hidden});
  // On CPU it is the composition itself: bit for bit the add, then rms_norm.
  const at::Tensor x = seeded({4, 6, 20}, 19, at::kBFloat16, kCpu), y = seeded({4, 6, 20}, 20, at::kBFloat16, kCpu);
  const at::Tensor w = seeded({20}, 21, at::kBFloat16, kCpu);
  const auto [sum, normed] = triax::add_rms_norm(x, y, w, kEps);
  EXPECT_TRUE(at::equal(sum, x + y));
  EXPECT_TRUE(at::equal(normed, triax::rms_norm(x + y, w, kEps)));
}

TEST(FusedOpsCpu, SwigluMatchesComposition) {
  for (c10::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    check_swiglu(kCpu, dtype, {3, 7, 1536});
    check_swiglu(kCpu, dtype, {5, 13, 37});
  }
}

TEST(FusedOpsCpu, SwigluHalvesMatchesComposition) {
  for (c10::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    check_swiglu_halves(kCpu, dtype, {3, 7, 2 * 1536});
    check_swiglu_halves(kCpu, dtype, {5, 13, 2 * 37});
  }
  // On CPU it is the composition itself: bit for bit what swiglu gives on the two halves.
  const at::Tensor x = seeded({4, 6, 20}, 18, at::kFloat, kCpu);
  EXPECT_TRUE(at::equal(triax::swiglu_halves(x), triax::swiglu(x.narrow(-1, 0, 10), x.narrow(-1, 10, 10))));
}

// The gradient and the output again, as a backward that did not keep the output needs them.
TEST(FusedOpsCpu, SwigluHalvesBackwardAndOutputEqualTheOpAndItsGradient) {
  for (c10::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    at::Tensor x = seeded({3, 7, 2 * 37}, 51, dtype, kCpu, 2.0).requires_grad_(true);
    const at::Tensor upstream = seeded({3, 7, 37}, 52, dtype, kCpu);
    const at::Tensor y = triax::swiglu_halves(x);
    const at::Tensor grad = torch::autograd::grad({y}, {x}, {upstream})[0];
    const auto [grad_again, y_again] = triax::swiglu_halves_backward_and_output(x.detach(), upstream);
    EXPECT_TRUE(at::equal(y_again, y)) << c10::toString(dtype);
    EXPECT_TRUE(at::equal(grad_again, grad)) << c10::toString(dtype);
  }
  EXPECT_THROW(triax::swiglu_halves_backward_and_output(at::ones({2, 8}), at::ones({2, 8})), triax::Error);
}

TEST(FusedOpsCpu, RotaryMatchesComposition) {
  for (c10::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    check_rotary(kCpu, dtype, {2, 3, 37, 64}, /*attention_layout=*/false);
    check_rotary(kCpu, dtype, {2, 5, 11, 6}, /*attention_layout=*/true);
  }
}

TEST(FusedOpsCpu, RotaryQkvMatchesComposition) {
  for (c10::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    check_rotary_qkv(kCpu, dtype, {2, 37, 3, 5, 64});  // 135m: 3 groups of 3 query heads
    check_rotary_qkv(kCpu, dtype, {1, 11, 4, 3, 6});   // one query head per group
  }
  check_rotary_qkv(kCpu, at::kFloat, {2, 9, 2, 4, 8}, /*k_used=*/false);
}

TEST(FusedOpsCpu, BadShapesNameTheTensor) {
  const at::Tensor x = at::ones({2, 4, 8});
  try {
    triax::rms_norm(x, at::ones({7}), kEps);
    ADD_FAILURE() << "rms_norm accepted a weight of the wrong size";
  } catch (const triax::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rms_norm: weight [7]"), std::string::npos) << e.what();
  }
  try {
    triax::swiglu(x, at::ones({2, 4, 9}));
    ADD_FAILURE() << "swiglu accepted operands of different shapes";
  } catch (const triax::Error& e) {
    EXPECT_NE(std::string(e.what()).find("swiglu: gate [2, 4, 8] and up [2, 4, 9]"), std::string::npos) << e.what();
  }
  try {
    triax::apply_rotary(at::ones({1, 2, 4, 8}), at::ones({5, 8}), at::ones({4, 8}));
    ADD_FAILURE() << "apply_rotary accepted a cos table of the wrong length";
  } catch (const triax::Error& e) {
    EXPECT_NE(std::string(e.what()).find("apply_rotary: cos [5, 8] must be [seq, head_dim] = [4, 8]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(triax::apply_rotary(at::ones({2, 4, 7}), at::ones({4, 7}), at::ones({4, 7})), triax::Error);
  try {
    triax::add_rms_norm(x, at::ones({2, 4, 7}), at::ones({8}), kEps);
    ADD_FAILURE() << "add_rms_norm accepted operands of different shapes";
  } catch (const triax::Error& e) {
    EXPECT_NE(std::string(e.what()).find("add_rms_norm: x [2, 4, 8] and y [2, 4, 7]"), std::string::npos) << e.what();
  }
  try {
    triax::rotary_qkv(at::ones({1, 4, 2, 8}), at::ones({4, 8}), at::ones({4, 8}));
    ADD_FAILURE() << "rotary_qkv accepted a 4-D qkv";
  } catch (const triax::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rotary_qkv: qkv must be [batch, seq, kv_heads, group + 2, head_dim]"),
              std::string::npos)
        << e.what();
  }
  try {
    triax::rotary_qkv(at::ones({1, 4, 2, 3, 8}), at::ones({5, 8}), at::ones({4, 8}));
    ADD_FAILURE() << "rotary_qkv accepted a cos table of the wrong length";
  } catch (const triax::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rotary_qkv: cos [5, 8] must be [seq, head_dim] = [4, 8]"), std::string::npos)
        << e.what();
  }
  try {
    triax::swiglu_halves(at::ones({2, 4, 9}));
    ADD_FAILURE() << "swiglu_halves accepted an odd last dim";
  } catch (const triax::Error& e) {
    EXPECT_NE(std::string(e.what()).find("swiglu_halves: gate_up [2, 4, 9] must have an even last dim"),
              std::string::npos)
        << e.what();
  }
}

// ---- CUDA: the kernels -----------------------------------------------------------------------

TEST(FusedOpsCuda, RmsNormMatchesComposition) {
  if (!has_gpu()) GTEST_SKIP() << "no GPU";
  ASSERT_TRUE(triax::fused_kernels_enabled()) << "a CUDA build runs the kernels unless TRIAX_FUSED_KERNELS=0";
  for (c10::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    for (int64_t hidden : kHiddenSizes) {
      check_rms_norm(kCuda, dtype, {3, 7, hidden});    // 21 rows: fewer than the backward's blocks
      check_rms_norm(kCuda, dtype, {5, 211, hidden});  // 1055 rows: one row a block
    }
  }
  // 4102 rows: the backward's 2048 blocks walk a pair of rows, six of them a lone third one too.
  check_rms_norm(kCuda, at::kBFloat16, {2, 2051, 576});
  check_rms_norm(kCuda, at::kHalf, {4, 33, 960});
  // A strided input (made contiguous inside) and a hidden size with no 16-byte rows in fp32.
  check_rms_norm(kCuda, at::kBFloat16, {9, 4, 576}, seeded({4, 9, 576}, 1, at::kBFloat16, kCuda, 2.0).transpose(0, 1));
  check_rms_norm(kCuda, at::kFloat, {6, 5, 38});
}

TEST(FusedOpsCuda, AddRmsNormMatchesComposition) {
  if (!has_gpu()) GTEST_SKIP() << "no GPU";
  for (c10::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    for (int64_t hidden : kHiddenSizes) {
      check_add_rms_norm(kCuda, dtype, {3, 7, hidden});
      check_add_rms_norm(kCuda, dtype, {5, 211, hidden});
    }
  }
  check_add_rms_norm(kCuda, at::kBFloat16, {2, 2051, 576});  // pairs of rows and a lone third
  check_add_rms_norm(kCuda, at::kHalf, {4, 33, 960});
  check_add_rms_norm(kCuda, at::kFloat, {6, 5, 38});  // rows of no 16 bytes
}

TEST(FusedOpsCuda, SwigluMatchesComposition) {
  if (!has_gpu()) GTEST_SKIP() << "no GPU";
  for (c10::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    check_swiglu(kCuda, dtype, {3, 7, 1536});
    check_swiglu(kCuda, dtype, {2, 129, 2560});
    check_swiglu(kCuda, dtype, {5, 13, 37});  // no whole vectors
  }
  // Operands starting one element past a 16-byte boundary: the scalar path.
  const int64_t count = 4 * 24;
  for (c10::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    at::Tensor gate = seeded({count + 1}, 14, dtype, kCuda, 3.0).narrow(0, 1, count).view({4, 24});
    at::Tensor up = seeded({count + 1}, 15, dtype, kCuda).narrow(0, 1, count).view({4, 24});
    check_swiglu(kCuda, dtype, {4, 24}, gate, up);
  }
}

TEST(FusedOpsCuda, SwigluHalvesMatchesComposition) {
  if (!has_gpu()) GTEST_SKIP() << "no GPU";
  for (c10::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    check_swiglu_halves(kCuda, dtype, {3, 7, 2 * 1536});    // the 135m ffn at tp 1
    check_swiglu_halves(kCuda, dtype, {2, 129, 2 * 4096});  // the 1.7b ffn at tp 2: several blocks a row
    check_swiglu_halves(kCuda, dtype, {5, 13, 2 * 37});     // halves off 16-byte boundaries: the scalar path
  }
  // 70,000 rows, more than gridDim.y's 65,535: blocks walk several rows.
  check_swiglu_halves(kCuda, at::kBFloat16, {70000, 2 * 8});
  // A strided input (made contiguous inside).
  check_swiglu_halves(kCuda, at::kBFloat16, {9, 4, 2 * 96},
                      seeded({4, 9, 2 * 96}, 19, at::kBFloat16, kCuda, 3.0).transpose(0, 1));
}

TEST(FusedOpsCuda, RotaryMatchesComposition) {
  if (!has_gpu()) GTEST_SKIP() << "no GPU";
  for (c10::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    for (bool attention_layout : {false, true}) {
      check_rotary(kCuda, dtype, {2, 9, 37, 64}, attention_layout);
      check_rotary(kCuda, dtype, {1, 3, 130, 128}, attention_layout);
      check_rotary(kCuda, dtype, {2, 5, 11, 6}, attention_layout);
    }
  }
}

TEST(FusedOpsCuda, RotaryQkvMatchesComposition) {
  if (!has_gpu()) GTEST_SKIP() << "no GPU";
  for (c10::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    check_rotary_qkv(kCuda, dtype, {2, 37, 3, 5, 64});   // 135m: 3 groups of 3 query heads
    check_rotary_qkv(kCuda, dtype, {1, 130, 4, 3, 64});  // 1.7b: one query head per group
    check_rotary_qkv(kCuda, dtype, {2, 11, 2, 4, 6});    // halves of 3 elements: the scalar path
  }
  check_rotary_qkv(kCuda, at::kBFloat16, {2, 9, 2, 4, 64}, /*k_used=*/false);
}

TEST(FusedOpsCuda, RotaryRefusesDifferentiableTables) {
  if (!has_gpu()) GTEST_SKIP() << "no GPU";
  const at::Tensor x = at::ones({1, 2, 4, 8}, at::TensorOptions().device(kCuda));
  const at::Tensor table = at::ones({4, 8}, at::TensorOptions().device(kCuda)).requires_grad_(true);
  EXPECT_THROW(triax::apply_rotary(x, table, table.detach()), triax::Error);
}

// The SwiGLU kernels under selective recomputation (parallelism.recompute_mlp_activation): the
// same kernel and GEMMs as the plain composition, so the same bits (CPU: tests/recompute_test.cpp).
TEST(FusedOpsCuda, LinearOfRecomputedSwigluEqualsTheComposition) {
  if (!has_gpu()) GTEST_SKIP() << "no GPU";
  using triax::RecomputedActivation;
  for (c10::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    at::Tensor x = seeded({2, 64, 2 * 384}, 41, dtype, kCuda, 2.0).requires_grad_(true);
    at::Tensor weight = seeded({96, 384}, 42, dtype, kCuda, 0.05).requires_grad_(true);
    const at::Tensor upstream = seeded({2, 64, 96}, 43, dtype, kCuda);
    at::Tensor y = triax::linear_of_recomputed_activation(RecomputedActivation::SwigluHalves, x, weight);
    const torch::autograd::variable_list grads = torch::autograd::grad({y}, {x, weight}, {upstream});
    at::Tensor y_ref = at::linear(triax::swiglu_halves(x), weight);
    const torch::autograd::variable_list grads_ref = torch::autograd::grad({y_ref}, {x, weight}, {upstream});
    const std::string where = c10::toString(dtype);
    EXPECT_TRUE(at::equal(y, y_ref)) << where;
    EXPECT_TRUE(at::equal(grads[0], grads_ref[0])) << where << ": the input's gradient";
    EXPECT_TRUE(at::equal(grads[1], grads_ref[1])) << where << ": the weight's gradient";
  }
}

}  // namespace
