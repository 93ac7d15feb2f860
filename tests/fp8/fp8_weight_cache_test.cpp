// The fp8 weights kept across micro-batches (triax/layers/fp8_weight_cache.hpp), on the CPU
// emulation: a step of four micro-batches casts each weight once and gives the same outputs and
// gradients, bit for bit, as casting it at every use; a change of the weight (in place, or
// through another tensor followed by fp8_weights_changed) casts it again; a weight in another
// storage at every use (as ZeRO-3 gathers it) is cast every time and never kept.
#include "triax/layers/fp8_weight_cache.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "fp8_test_support.hpp"
#include "triax/fp8.hpp"
#include "triax/layers/fp8_linear.hpp"

namespace {

constexpr int kMicroBatches = 4;

using triax::fp8_testing::seeded;

triax::Fp8LinearPlan tensorwise_plan(bool keep_weights) {
  triax::Fp8LinearPlan plan;
  plan.recipe = triax::Fp8Recipe::Tensorwise;
  if (keep_weights) plan.weight_cache = std::make_shared<triax::Fp8WeightCache>();
  return plan;
}

// Three optimizer steps of kMicroBatches micro-batches (gradients accumulated) on one weight:
// after the first the update is in place on the parameter, after the second it is written
// through another tensor on the same memory (as a flat optimizer buffer) and announced. Returns
// every output, every step's weight gradient and the final weight.
std::vector<at::Tensor> train(const triax::Fp8LinearPlan& plan) {
  at::Tensor weight = seeded({48, 64}, 1, 0.1).requires_grad_(true);
  std::vector<at::Tensor> results;
  for (int step = 0; step < 3; ++step) {
    for (int micro_batch = 0; micro_batch < kMicroBatches; ++micro_batch) {
      const at::Tensor x = seeded({20, 64}, 10 + 10 * step + micro_batch).requires_grad_(true);
      const at::Tensor y = triax::fp8_linear(x, weight, plan);
      y.backward(seeded({20, 48}, 50 + 10 * step + micro_batch));
      results.push_back(y.detach());
      results.push_back(x.grad());
    }
    results.push_back(weight.grad().clone());
    at::NoGradGuard no_grad;
    if (step == 0) {
      weight.sub_(weight.grad() * 0.5);
    } else {
      at::Tensor flat = at::from_blob(weight.data_ptr(), weight.sizes(), weight.options().requires_grad(false));
      flat.sub_(weight.grad() * 0.5);
      triax::fp8_weights_changed();
    }
    weight.mutable_grad().zero_();
  }
  results.push_back(weight.detach().clone());
  return results;
}

TEST(Fp8WeightCacheCpu, FourMicroBatchesCastTheWeightOnceAndComputeAsCastingEveryTime) {
  const triax::Fp8LinearPlan kept = tensorwise_plan(true), every_time = tensorwise_plan(false);
  const std::vector<at::Tensor> with_cache = train(kept), without = train(every_time);
  ASSERT_EQ(with_cache.size(), without.size());
  for (size_t i = 0; i < with_cache.size(); ++i) EXPECT_TRUE(at::equal(with_cache[i], without[i])) << "result " << i;
  EXPECT_EQ(kept.weight_cache->casts(), 3);  // once per step
}

TEST(Fp8WeightCacheCpu, AWeightInAnotherStorageAtEveryUseIsCastEveryTimeAndNotKept) {
  const triax::Fp8LinearPlan plan = tensorwise_plan(true);
  const at::Tensor weight = seeded({48, 64}, 2, 0.1), x = seeded({20, 64}, 3);
  at::NoGradGuard no_grad;
  for (int use = 0; use < kMicroBatches; ++use) {
    const at::Tensor gathered = weight.clone();  // a fresh storage, as a ZeRO-3 gather
    EXPECT_TRUE(at::equal(triax::fp8_linear(x, gathered, plan), triax::fp8_linear(x, weight, tensorwise_plan(false))));
  }
  EXPECT_EQ(plan.weight_cache->casts(), kMicroBatches);
}

}  // namespace
