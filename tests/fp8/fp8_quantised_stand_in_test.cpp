// The stand-in of a tensor whose producer writes its fp8 copy itself (quantised_stand_in.hpp;
// docs/fp8.md, "SwiGLU's gradient in fp8"), on the CPU: found through the reshape autograd applies,
// taken once, NaN to any other reader, dropped with its tensor; and a tensorwise fp8 linear whose
// output gradient comes as a stand-in computes the gradients it computes from the tensor itself,
// bit for bit (the CUDA producer, SwiGLU's backward: fp8_producer_amax_test.cpp).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/custom_function.h>

#include <memory>
#include <vector>

#include "fp8_matmul.hpp"
#include "quantised_stand_in.hpp"
#include "triax/layers/fp8_linear.hpp"

namespace {

using triax::fp8::DirectQuantiser;
using triax::fp8::Fp8Matrix;
using triax::fp8::Layout;
using triax::fp8::Scaling;

// A quantiser that counts its calls and quantises `values` as quantise would.
DirectQuantiser quantiser_of(const at::Tensor& values, std::shared_ptr<int> calls) {
  return [values, calls](const Scaling& scaling, const triax::TensorParallel& tp, Layout layout) {
    ++*calls;
    return triax::fp8::quantise(values.reshape({-1, values.size(-1)}), scaling, tp, layout);
  };
}

TEST(Fp8QuantisedStandInCpu, IsFoundThroughAReshapeTakenOnceAndReadsAsNan) {
  const at::Tensor values = at::randn({2, 8, 32});
  auto calls = std::make_shared<int>(0);
  const size_t taken = triax::fp8::quantised_stand_ins_taken();
  const at::Tensor stand_in =
      triax::fp8::quantised_stand_in(values.sizes(), values.options(), quantiser_of(values, calls));
  EXPECT_EQ(stand_in.sizes(), values.sizes());
  EXPECT_EQ(stand_in.scalar_type(), values.scalar_type());
  EXPECT_EQ(stand_in.storage().nbytes(), sizeof(float)) << "one element, broadcast";
  EXPECT_TRUE(at::isnan(stand_in).all().item<bool>()) << "another reader reads NaN";
  EXPECT_FALSE(triax::fp8::is_quantised_stand_in(values));
  EXPECT_FALSE(triax::fp8::is_quantised_stand_in(stand_in.contiguous())) << "a copy is not the stand-in";
  EXPECT_FALSE(triax::fp8::is_quantised_stand_in(stand_in.narrow(0, 0, 1))) << "part of it";

  const at::Tensor rows = stand_in.reshape({16, 32});  // the fp8 linear's rows
  ASSERT_TRUE(triax::fp8::is_quantised_stand_in(rows));
  const Fp8Matrix direct = triax::fp8::quantise(rows, {c10::ScalarType::Float8_e5m2}, {}, Layout::Both);
  const Fp8Matrix cast =
      triax::fp8::quantise(values.reshape({16, 32}), {c10::ScalarType::Float8_e5m2}, {}, Layout::Both);
  EXPECT_EQ(*calls, 1);
  EXPECT_EQ(triax::fp8::quantised_stand_ins_taken(), taken + 1);
  EXPECT_TRUE(at::equal(direct.data.view(at::kByte), cast.data.view(at::kByte)));
  EXPECT_TRUE(at::equal(direct.transposed.view(at::kByte), cast.transposed.view(at::kByte)));
  EXPECT_TRUE(at::equal(direct.scale, cast.scale));
  EXPECT_FALSE(triax::fp8::is_quantised_stand_in(stand_in)) << "taken: a second quantise gets the NaN";
  EXPECT_FALSE(triax::fp8::take_direct_quantiser(stand_in));
}

TEST(Fp8QuantisedStandInCpu, TheRecordOfADeadStandInIsDropped) {
  const size_t waiting = triax::fp8::quantised_stand_ins_waiting();
  auto calls = std::make_shared<int>(0);
  {
    const at::Tensor values = at::randn({4, 16});
    const at::Tensor stand_in =
        triax::fp8::quantised_stand_in(values.sizes(), values.options(), quantiser_of(values, calls));
    EXPECT_EQ(triax::fp8::quantised_stand_ins_waiting(), waiting + 1);
  }
  EXPECT_EQ(triax::fp8::quantised_stand_ins_waiting(), waiting);
  const at::Tensor other = at::randn({4, 16});
  EXPECT_FALSE(triax::fp8::take_direct_quantiser(other));
  EXPECT_EQ(*calls, 0);
}

// y's gradient comes back from `gradient` as it is, or (stand_in) as a stand-in quantised from it.
struct GradientSource : torch::autograd::Function<GradientSource> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& y, const at::Tensor& gradient,
                            bool stand_in) {
    ctx->saved_data["gradient"] = gradient;
    ctx->saved_data["stand_in"] = stand_in;
    return y.sum();
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list) {
    const at::Tensor gradient = ctx->saved_data["gradient"].toTensor();
    if (!ctx->saved_data["stand_in"].toBool()) return {gradient, at::Tensor(), at::Tensor()};
    return {triax::fp8::quantised_stand_in(gradient.sizes(), gradient.options(),
                                           quantiser_of(gradient, std::make_shared<int>(0))),
            at::Tensor(), at::Tensor()};
  }
};

TEST(Fp8QuantisedStandInCpu, ATensorwiseFp8LinearTakesAStandInGradientWithTheBitsOfTheTensor) {
  at::manual_seed(3);
  const at::Tensor x0 = at::randn({2, 24, 64}), w0 = at::randn({48, 64}) * 0.1;
  const at::Tensor gradient = at::randn({2, 24, 48}) * 1e-3;
  triax::Fp8LinearPlan plan;
  plan.recipe = triax::Fp8Recipe::Tensorwise;
  std::vector<at::Tensor> grads[2];
  for (bool stand_in : {false, true}) {
    const at::Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true);
    const size_t taken = triax::fp8::quantised_stand_ins_taken();
    GradientSource::apply(triax::fp8_linear(x, w, plan), gradient, stand_in).backward();
    EXPECT_EQ(triax::fp8::quantised_stand_ins_taken() - taken, stand_in ? 1u : 0u);
    grads[stand_in] = {x.grad(), w.grad()};
  }
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(grads[1][i].defined()) << "gradient " << i;
    EXPECT_TRUE(at::isfinite(grads[1][i]).all().item<bool>()) << "gradient " << i << ": the NaN was read";
    EXPECT_TRUE(at::equal(grads[1][i], grads[0][i])) << "gradient " << i;
  }
}

}  // namespace
