// The Mamba-2 block's training forward and backward with TRIAX_MAMBA_BLOCK_NORM_FUSED=1 against
// it off, bit for bit (ssm_block_norm_check.hpp, the check of mamba_block_norm_test.cpp), the tiny
// model's first layer. Mamba2BlockNormCpu: bf16 on the CPU (the compositions). Mamba2BlockNormCuda
// (label gpu; skipped without a GPU): bf16 (the kernels) and fp32 (left on the unfused path).
#include <gtest/gtest.h>

#include "mamba2_test_support.hpp"
#include "ssm_block_norm_check.hpp"

namespace mamba2_block_norm_test {  // named: the tests compile in unity batches

using namespace mamba2_test;

void expect_switch_changes_no_bit(c10::ScalarType dtype, c10::Device device) {
  triax::test::expect_tiny_block_norm_switch_changes_no_bit(
      [](const ModelContext& context) { return build(tiny_yaml(false), context); }, tiny_model_context(), dtype,
      device);
}

TEST(Mamba2BlockNormCpu, SwitchChangesNoBit) { expect_switch_changes_no_bit(at::kBFloat16, c10::kCPU); }

TEST(Mamba2BlockNormCuda, SwitchChangesNoBit) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  for (c10::ScalarType dtype : {at::kBFloat16, at::kFloat})
    expect_switch_changes_no_bit(dtype, c10::Device(c10::kCUDA, 0));
}

}  // namespace mamba2_block_norm_test
