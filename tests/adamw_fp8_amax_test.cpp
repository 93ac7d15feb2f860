// The fused AdamW kernel's amax of the weights it writes (docs/fp8.md, "The amax from the
// producer"): with a layer in tensorwise fp8, the adamw plugin's kernel also takes the amax of
// each rounded weight (a matrix, or a stack of them as the fused q/k/v projection's) as it writes
// it and records it for the next step's fp8 cast, so that the cast needs no amax pass. On a GPU
// only (AdamWKernelCuda, label gpu).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "recorded_amax.hpp"
#include "training_test_support.hpp"
#include "triax/fp8.hpp"
#include "triax/fp8_weight_amax.hpp"
#include "triax/layers/swiglu_mlp.hpp"
#include "triax/model.hpp"

namespace triax {
namespace {

// Exactly max |parameter|; never for a vector; and each step moves the parameter's version
// counter, so that an earlier step's record never matches the parameter it wrote again.
TEST(AdamWKernelCuda, RecordsTheRoundedWeightsAmaxForTheNextFp8Cast) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  ModelContext context;
  context.fp8 = std::make_shared<const Fp8Options>(Fp8Options::from_yaml("min_gemm_size: 0"));
  torch::nn::Module model;
  model.register_module("mlp", std::make_shared<SwiGluMlp>(64, 128, context));
  convert_linears_to_fp8(model, context);
  ASSERT_TRUE(fp8_weight_amaxes_wanted());

  const at::TensorOptions cuda = at::TensorOptions().device(at::kCUDA);
  const std::vector<at::Tensor> initial = {at::randn({4097, 33}, cuda).to(at::kBFloat16),
                                           at::randn({1000}, cuda).to(at::kBFloat16),
                                           at::randn({3, 8, 16}, cuda).to(at::kBFloat16)};
  std::vector<at::Tensor> params;
  for (const at::Tensor& p : initial) params.push_back(p.clone());
  const auto optimizer =
      testing::make_optimizer("adamw", params, "optimizer_factory: {name: adamW, adam_beta1: 0.9, adam_beta2: 0.95}\n");
  auto step = [&] {
    std::vector<at::Tensor> low;
    for (const at::Tensor& p : initial) low.push_back(at::randn(p.sizes(), cuda).to(at::kBFloat16));
    const int64_t version = params[0]._version();
    optimizer->step(low, 0.01, at::full({}, 0.5f, cuda));
    EXPECT_GT(params[0]._version(), version) << "the parameter was written in place";
  };
  for (int t = 0; t < 2; ++t) {
    step();
    for (size_t i : {size_t{0}, size_t{2}}) {
      const at::Tensor slots = fp8::recorded_amax(params[i]);
      ASSERT_TRUE(slots.defined()) << "step " << t << ", parameter " << i << ": no amax recorded";
      EXPECT_EQ(slots.max().item<float>(), params[i].abs().max().to(at::kFloat).item<float>())
          << "step " << t << ", parameter " << i;
    }
    EXPECT_FALSE(fp8::recorded_amax(params[1]).defined()) << "a vector is never cast";
  }
  setenv("TRIAX_FP8_PRODUCER_AMAX", "0", 1);
  step();
  unsetenv("TRIAX_FP8_PRODUCER_AMAX");
  EXPECT_FALSE(fp8::recorded_amax(params[0]).defined()) << "switched off: the earlier record is stale";
}

}  // namespace
}  // namespace triax
