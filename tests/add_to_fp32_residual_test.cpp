// add_to_fp32_residual (triax/layers/fp32_residual_add.hpp): a 16-bit layer output added to a
// residual stream kept in fp32 (the Mamba blocks' residual add with TRIAX_MAMBA_BLOCK_NORM_FUSED=1).
// AddToFp32ResidualCpu: residual + y; a residual not fp32 or of another shape is refused.
// AddToFp32ResidualCuda (label gpu; skipped without a GPU): the kernel's sum and its gradients
// (the residual's fp32, y's in y's dtype) equal LibTorch's mixed-dtype add's bit for bit, for bf16,
// fp16 and fp32 y, counts that fill whole vectors, an odd count (the tail) and operands one
// element off 16-byte alignment (the element-wise path); the forward dispatches no LibTorch add.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <string>
#include <vector>

#include "dispatched_ops.hpp"
#include "triax/layers/fp32_residual_add.hpp"

namespace add_to_fp32_residual_test {  // named: the tests compile in unity batches

at::Tensor seeded(int64_t count, uint64_t seed, c10::ScalarType dtype) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn({count}, generator, at::TensorOptions().dtype(at::kDouble)).to(dtype);
}

TEST(AddToFp32ResidualCpu, IsTheAddAndRefusesBadOperands) {
  const at::Tensor residual = seeded(40, 1, at::kFloat), y = seeded(40, 2, at::kBFloat16);
  EXPECT_TRUE(at::equal(triax::add_to_fp32_residual(residual, y), residual + y));
  EXPECT_THROW(triax::add_to_fp32_residual(residual.to(at::kBFloat16), y), std::exception);
  EXPECT_THROW(triax::add_to_fp32_residual(residual.narrow(0, 0, 8), y), std::exception);
}

TEST(AddToFp32ResidualCuda, KernelEqualsTheMixedDtypeAdd) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  const c10::Device cuda(c10::kCUDA, 0);
  for (c10::ScalarType dtype : {at::kBFloat16, at::kHalf, at::kFloat})
    for (int64_t count : {8, 3 * 2048 * 16, 1001})
      for (int64_t offset : {0, 1}) {  // 1: every operand one element past 16-byte alignment
        SCOPED_TRACE(std::string(c10::toString(dtype)) + " count " + std::to_string(count) + " offset " +
                     std::to_string(offset));
        const at::Tensor residual_all = seeded(count + offset, 3 + count, at::kFloat).to(cuda);
        const at::Tensor y_all = seeded(count + offset, 4 + count, dtype).to(cuda);
        const at::Tensor grad = seeded(count, 5 + count, at::kFloat).to(cuda);
        std::vector<at::Tensor> outs, residual_grads, y_grads;
        for (bool kernel : {true, false}) {
          const at::Tensor residual = residual_all.narrow(0, offset, count).detach().requires_grad_(true);
          const at::Tensor y = y_all.narrow(0, offset, count).detach().requires_grad_(true);
          at::Tensor out;
          const int64_t adds = count_dispatched_ops(
              [&] { out = kernel ? triax::add_to_fp32_residual(residual, y) : residual + y; }, {"aten::add"});
          EXPECT_EQ(adds, kernel ? 0 : 1);
          out.backward(grad);
          outs.push_back(out.detach());
          residual_grads.push_back(residual.grad());
          y_grads.push_back(y.grad());
        }
        ASSERT_EQ(outs[0].scalar_type(), at::kFloat);
        EXPECT_TRUE(at::equal(outs[0], outs[1])) << "the sum";
        EXPECT_TRUE(at::equal(residual_grads[0], residual_grads[1])) << "the residual's gradient";
        ASSERT_EQ(y_grads[0].scalar_type(), dtype);
        EXPECT_TRUE(at::equal(y_grads[0], y_grads[1])) << "y's gradient";
      }
}

}  // namespace add_to_fp32_residual_test
