// The Mamba block's training forward and backward with TRIAX_MAMBA_BLOCK_NORM_FUSED=1 against it
// off, bit for bit (ssm_block_norm_check.hpp; Mamba-2's in mamba2_block_norm_test.cpp), the tiny
// model's first layer. MambaBlockNormCpu: bf16 on the CPU (the compositions). MambaBlockNormCuda
// (label gpu; skipped without a GPU): bf16 (the kernels; fp16 is in the ops' own tests) and fp32
// (which the switch leaves on the unfused path).
#include <gtest/gtest.h>

#include "mamba_test_support.hpp"
#include "ssm_block_norm_check.hpp"

namespace mamba_block_norm_test {  // named: the tests compile in unity batches

using namespace mamba_test;

void expect_switch_changes_no_bit(c10::ScalarType dtype, c10::Device device) {
  triax::test::expect_tiny_block_norm_switch_changes_no_bit(
      [](const ModelContext& context) { return build(tiny_yaml(false), context); }, tiny_model_context(), dtype,
      device);
}

TEST(MambaBlockNormCpu, SwitchChangesNoBit) { expect_switch_changes_no_bit(at::kBFloat16, c10::kCPU); }

TEST(MambaBlockNormCuda, SwitchChangesNoBit) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  for (c10::ScalarType dtype : {at::kBFloat16, at::kFloat})
    expect_switch_changes_no_bit(dtype, c10::Device(c10::kCUDA, 0));
}

}  // namespace mamba_block_norm_test
