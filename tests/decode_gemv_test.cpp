// decode_gemv (decode_gemv.hpp): the GEMV kernel of a decoding step's linear layers against the
// LibTorch product in fp32 (DecodeGemvCuda, ctest label gpu, skipped without a GPU), and where it
// leaves the product to the GEMM (DecodeGemvCpu: CPU tensors, more rows than it takes). Its SwiGLU
// variant, decode_gate_up_swiglu: the bits of the product then swiglu_halves on CUDA, the two ops
// on CPU, and nothing where a gradient is wanted or there are more rows. The kernels launched with
// programmatic dependent launch (kernels::GemvLaunch::Programmatic, TRIAX_DECODE_GEMV_PDL=1): the
// bits of the stream-ordered launch, also in a CUDA graph behind the kernel that writes x.
#include "triax/layers/decode_gemv.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include "triax/layers/fused_ops.hpp"

#include <cstdlib>
#include <string>
#include <vector>

#ifdef TRIAX_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>

#include "triax/kernels/cuda_launch.hpp"
#endif

namespace {

// Read once by the library: set before the first product.
const bool kSwitchedOn = setenv("TRIAX_DECODE_GEMV", "1", 1) == 0;

at::Tensor seeded(const std::vector<int64_t>& shape, uint64_t seed, c10::ScalarType dtype, c10::Device device) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn(shape, generator, at::TensorOptions().dtype(at::kDouble)).to(device, dtype);
}

TEST(DecodeGemvCpu, LeavesCpuTensorsToTheGemm) {
  ASSERT_TRUE(kSwitchedOn);
  EXPECT_FALSE(triax::decode_gemv(at::ones({1, 1, 16}), at::ones({8, 16})).defined());
}

TEST(DecodeGemvCpu, GateUpSwigluIsTheTwoOpsAndOnlyAtDecodingSizes) {
  const at::Tensor x = seeded({2, 1, 16}, 1, at::kFloat, at::kCPU), w = seeded({24, 16}, 2, at::kFloat, at::kCPU);
  const at::Tensor y = triax::decode_gate_up_swiglu(x, w);
  ASSERT_TRUE(y.defined());
  EXPECT_TRUE(at::equal(y, triax::swiglu_halves(at::linear(x, w))));
  EXPECT_FALSE(triax::decode_gate_up_swiglu(seeded({5, 16}, 1, at::kFloat, at::kCPU), w).defined());
  EXPECT_FALSE(triax::decode_gate_up_swiglu(x, w.clone().requires_grad_(true)).defined());
}

TEST(DecodeGemvCuda, GateUpSwigluHasTheBitsOfTheProductThenSwiglu) {
  ASSERT_TRUE(kSwitchedOn);
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  // 1.7b's gate/up projection (2 x 8192 rows over 2048), and a small one.
  const std::vector<std::pair<int64_t, int64_t>> shapes{{2048, 8192}, {64, 40}};
  for (const c10::ScalarType dtype : {at::kBFloat16, at::kFloat})
    for (const auto& [in, half] : shapes)
      for (int64_t rows = 1; rows <= 4; ++rows) {
        const at::Tensor x = seeded({rows, 1, in}, 3, dtype, at::kCUDA);
        const at::Tensor w = seeded({2 * half, in}, 4, dtype, at::kCUDA);
        const std::string what = std::string(c10::toString(dtype)) + " rows " + std::to_string(rows) + " [2 x " +
                                 std::to_string(half) + ", " + std::to_string(in) + "]";
        const at::Tensor y = triax::decode_gate_up_swiglu(x, w);
        const at::Tensor product = triax::decode_gemv(x, w);
        ASSERT_TRUE(y.defined() && product.defined()) << what;
        ASSERT_EQ(y.sizes(), (std::vector<int64_t>{rows, 1, half})) << what;
        EXPECT_TRUE(at::equal(y, triax::swiglu_halves(product))) << what;
      }
}

TEST(DecodeGemvCuda, EqualsTheProductInFp32) {
  ASSERT_TRUE(kSwitchedOn);
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  // 1.7b's o_proj, q/k/v, down_proj; an odd number of features.
  const std::vector<std::pair<int64_t, int64_t>> shapes{{2048, 2048}, {2048, 6144}, {8192, 2048}, {64, 37}};
  for (const c10::ScalarType dtype : {at::kBFloat16, at::kFloat})
    for (const auto& [in, out] : shapes)
      for (int64_t rows = 1; rows <= 4; ++rows) {
        const at::Tensor x = seeded({rows, 1, in}, 1, dtype, at::kCUDA), w = seeded({out, in}, 2, dtype, at::kCUDA);
        const at::Tensor y = triax::decode_gemv(x, w);
        const std::string what = std::string(c10::toString(dtype)) + " rows " + std::to_string(rows) + " [" +
                                 std::to_string(out) + ", " + std::to_string(in) + "]";
        ASSERT_TRUE(y.defined()) << what;
        ASSERT_EQ(y.sizes(), (std::vector<int64_t>{rows, 1, out})) << what;
        const at::Tensor expected = at::matmul(x.to(at::kDouble), w.to(at::kDouble).t());
        const double error = (y.to(at::kDouble) - expected).abs().max().item<double>() /
                             expected.abs().max().item<double>();
        EXPECT_LE(error, dtype == at::kFloat ? 1e-5 : 1e-2) << what;
      }
  // Five rows: the GEMM's.
  EXPECT_FALSE(triax::decode_gemv(seeded({5, 64}, 1, at::kBFloat16, at::kCUDA), seeded({8, 64}, 2, at::kBFloat16, at::kCUDA))
                   .defined());
}

#ifdef TRIAX_WITH_CUDA
using triax::kernels::GemvLaunch;

// x [rows, ..., in] times w [out (x 2 with SwiGLU), in] through kernels::gemv (gemv_swiglu), launched
// `how` on the current stream: [rows, out].
at::Tensor kernel_product(const at::Tensor& x, const at::Tensor& w, bool swiglu, GemvLaunch how) {
  const int64_t in = w.size(1), out = swiglu ? w.size(0) / 2 : w.size(0), rows = x.numel() / in;
  at::Tensor y = at::empty({rows, out}, x.options());
  const auto launch = swiglu ? triax::kernels::gemv_swiglu : triax::kernels::gemv;
  triax::cuda_launch::check(
      launch(*triax::cuda_launch::kernel_dtype(x.scalar_type()), x.const_data_ptr(), w.const_data_ptr(),
             y.mutable_data_ptr(), rows, out, in, triax::cuda_launch::stream_of(x), how),
      "kernel_product");
  return y;
}
#endif

TEST(DecodeGemvCuda, ProgrammaticLaunchHasTheBitsOfTheStreamOrderedOne) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
#ifdef TRIAX_WITH_CUDA
  struct Shape {
    int64_t in, out;
    bool swiglu;
  };
  // 1.7b's q/k/v, o_proj, down_proj, lm_head and gate/up (2 x 8192 over 2048); rows of one vector
  // more than whole chunks of held vectors (8200, 4104), and shorter than a warp's first vectors.
  const std::vector<Shape> shapes{{2048, 6144, false},  {2048, 2048, false}, {8192, 2048, false},
                                  {2048, 49152, false}, {2048, 8192, true},  {8200, 33, false},
                                  {4104, 17, true},     {64, 37, false},     {24, 5, true}};
  for (const c10::ScalarType dtype : {at::kBFloat16, at::kFloat})
    for (const Shape& shape : shapes)
      for (int64_t rows = 1; rows <= 4; ++rows) {
        const at::Tensor x = seeded({rows, 1, shape.in}, 5, dtype, at::kCUDA);
        const at::Tensor w = seeded({(shape.swiglu ? 2 : 1) * shape.out, shape.in}, 6, dtype, at::kCUDA);
        const at::Tensor streamed = kernel_product(x, w, shape.swiglu, GemvLaunch::Stream);
        const at::Tensor programmatic = kernel_product(x, w, shape.swiglu, GemvLaunch::Programmatic);
        EXPECT_TRUE(at::equal(programmatic, streamed)) << c10::toString(dtype) << " rows " << rows << " [" << shape.out
                                                       << (shape.swiglu ? " x 2" : "") << ", " << shape.in << "]";
      }
#endif
}

// In a CUDA graph, as a decoding step records it, the programmatic launch reads the x that the
// kernel before it writes (a column sum of 16 MiB, long enough for the GEMV to start before it ends).
TEST(DecodeGemvCuda, ProgrammaticLaunchWaitsForTheKernelBeforeItInAGraph) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
#ifdef TRIAX_WITH_CUDA
  const at::Tensor columns = seeded({4096, 2048}, 7, at::kBFloat16, at::kCUDA);
  const at::Tensor w = seeded({2 * 8192, 2048}, 8, at::kBFloat16, at::kCUDA);
  const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  at::cuda::CUDAGraph graph;
  at::Tensor x, y, gated;
  {
    const c10::cuda::CUDAStreamGuard guard(side);
    kernel_product(columns.sum(0).view({1, 2048}), w, false, GemvLaunch::Programmatic);  // outside: lazy set-up
    graph.capture_begin();
    x = columns.sum(0).view({1, 2048});
    y = kernel_product(x, w, false, GemvLaunch::Programmatic);
    gated = kernel_product(y.narrow(1, 0, 2048).contiguous(), w.narrow(0, 0, 4096), true, GemvLaunch::Programmatic);
    graph.capture_end();
  }
  for (const uint64_t seed : {9, 10}) {
    columns.copy_(seeded({4096, 2048}, seed, at::kBFloat16, at::kCUDA));
    graph.replay();  // on the current stream, ordered after the copy and before the checks
    EXPECT_TRUE(at::equal(x, columns.sum(0).view({1, 2048}))) << "seed " << seed;
    EXPECT_TRUE(at::equal(y, kernel_product(x, w, false, GemvLaunch::Stream))) << "seed " << seed;
    EXPECT_TRUE(at::equal(
        gated, kernel_product(y.narrow(1, 0, 2048).contiguous(), w.narrow(0, 0, 4096), true, GemvLaunch::Stream)))
        << "seed " << seed;
  }
#endif
}

}  // namespace
