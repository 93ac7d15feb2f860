// The fp8 linear (triax/layers/fp8_linear.hpp) and the fp8 config section (triax/fp8.hpp).
// Fp8LinearCpu: the CPU emulation against the fp32 product within fp8's tolerance, rowwise
// scales against tensorwise ones, the section's refusals and the choice of layers. Fp8LinearCuda
// (ctest label gpu, skipped without a GPU): at::_scaled_mm against the bf16 product and against
// the CPU emulation of the same quantised operands.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <memory>
#include <string>

#include "fp8_test_support.hpp"
#include "triax/error.hpp"
#include "triax/fp8.hpp"
#include "triax/glob_match.hpp"
#include "triax/layers/fp8_linear.hpp"
#include "triax/layers/linear.hpp"
#include "triax/model.hpp"

namespace {

using triax::Fp8LinearPlan;
using triax::Fp8Recipe;

using triax::fp8_testing::fp8_context;
using triax::fp8_testing::seeded;

// ||actual - expected|| / ||expected|| over the whole tensor.
double relative_error(const at::Tensor& actual, const at::Tensor& expected) {
  const at::Tensor a = actual.to(at::kDouble).cpu(), e = expected.to(at::kDouble).cpu();
  return ((a - e).norm() / e.norm()).item<double>();
}

struct Products {
  at::Tensor y, grad_x, grad_weight;
};

// y = x W^T and its gradients for the upstream gradient `grad_y`, through fp8 or (no plan) exactly.
Products run(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& grad_y, const Fp8LinearPlan* plan) {
  at::Tensor xl = x.detach().clone().requires_grad_(true), wl = weight.detach().clone().requires_grad_(true);
  at::Tensor y = plan != nullptr ? triax::fp8_linear(xl, wl, *plan) : at::linear(xl, wl);
  y.backward(grad_y);
  return {y.detach(), xl.grad(), wl.grad()};
}

Fp8LinearPlan plan_of(Fp8Recipe recipe) {
  Fp8LinearPlan plan;
  plan.recipe = recipe;
  return plan;
}

const Fp8Recipe kRecipes[] = {Fp8Recipe::Tensorwise, Fp8Recipe::Rowwise};

// e4m3 keeps 3 mantissa bits, e5m2 2: on Gaussian operands the product of quantised operands is
// about 4% (e4m3 x e4m3) or 6% (an e5m2 gradient) off the exact one, in norm, and never exact.
double tolerance(Fp8Recipe recipe, bool gradient) {
  return gradient && recipe == Fp8Recipe::Tensorwise ? 0.1 : 0.05;
}

void expect_fp8_close(const Products& fp8, const Products& exact, Fp8Recipe recipe) {
  const std::string what = triax::fp8_recipe_name(recipe);
  ASSERT_EQ(fp8.y.sizes(), exact.y.sizes()) << what;
  const double errors[] = {relative_error(fp8.y, exact.y), relative_error(fp8.grad_x, exact.grad_x),
                           relative_error(fp8.grad_weight, exact.grad_weight)};
  const char* names[] = {"output", "input gradient", "weight gradient"};
  for (int i = 0; i < 3; ++i) {
    EXPECT_LT(errors[i], tolerance(recipe, i > 0)) << what << " " << names[i];
    EXPECT_GT(errors[i], 1e-3) << what << " " << names[i] << " is not quantised";
  }
}

TEST(Fp8LinearCpu, ForwardAndBackwardFollowTheFp32ProductWithinFp8Tolerance) {
  const at::Tensor x = seeded({3, 20, 64}, 1), weight = seeded({48, 64}, 2, 0.1), grad_y = seeded({3, 20, 48}, 3);
  const Products exact = run(x, weight, grad_y, nullptr);
  for (Fp8Recipe recipe : kRecipes) {
    const Fp8LinearPlan plan = plan_of(recipe);
    expect_fp8_close(run(x, weight, grad_y, &plan), exact, recipe);
  }
}

// One row of x 10^5 times larger than the others: beyond e4m3's range of magnitudes (2^-9 to
// 448), one tensorwise scale flushes the small rows to zero or to a few subnormal steps; rowwise
// scales keep each row as precise as the others.
TEST(Fp8LinearCpu, RowwiseScalesFollowEachRowWhereOneTensorwiseScaleCannot) {
  at::Tensor x = seeded({32, 64}, 4);
  x[0].mul_(1e5);
  const at::Tensor weight = seeded({32, 64}, 5), grad_y = seeded({32, 32}, 6);
  const Products exact = run(x, weight, grad_y, nullptr);
  const Fp8LinearPlan tensorwise = plan_of(Fp8Recipe::Tensorwise), rowwise = plan_of(Fp8Recipe::Rowwise);
  const at::Tensor small_rows = at::arange(1, 32);
  const double rowwise_error =
      relative_error(run(x, weight, grad_y, &rowwise).y.index_select(0, small_rows), exact.y.index_select(0, small_rows));
  const double tensorwise_error = relative_error(run(x, weight, grad_y, &tensorwise).y.index_select(0, small_rows),
                                                 exact.y.index_select(0, small_rows));
  EXPECT_LT(rowwise_error, 0.06);
  EXPECT_GT(tensorwise_error, 0.2);
}

// An all-zero input gets a finite scale: zeros out, zero gradients, no NaN.
TEST(Fp8LinearCpu, AZeroInputGivesZerosNotNaN) {
  for (Fp8Recipe recipe : kRecipes) {
    const Fp8LinearPlan plan = plan_of(recipe);
    const Products fp8 = run(at::zeros({16, 32}), seeded({16, 32}, 7), seeded({16, 16}, 8), &plan);
    EXPECT_EQ(fp8.y.abs().max().item<float>(), 0.0f);
    EXPECT_EQ(fp8.grad_weight.abs().max().item<float>(), 0.0f);
    EXPECT_TRUE(fp8.grad_x.isfinite().all().item<bool>());
  }
}

std::string error_of(const std::string& yaml) {
  try {
    triax::Fp8Options::from_yaml(yaml);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(Fp8LinearCpu, TheSectionRefusesBadValuesNamingTheirKey) {
  const std::string recipe = error_of("recipe: blockwise");
  EXPECT_NE(recipe.find("fp8.recipe"), std::string::npos) << recipe;
  EXPECT_NE(recipe.find("tensorwise, rowwise"), std::string::npos) << recipe;
  const std::string unknown = error_of("recipe: rowwise\nlayers: ['*']");
  EXPECT_NE(unknown.find("fp8.layers"), std::string::npos) << unknown;
  const std::string empty = error_of("linears: []");
  EXPECT_NE(empty.find("fp8.linears"), std::string::npos) << empty;
  const triax::Fp8Options defaults = triax::Fp8Options::from_yaml("{}");
  EXPECT_EQ(defaults.recipe, Fp8Recipe::Tensorwise);
  EXPECT_EQ(defaults.linears, std::vector<std::string>{"*"});
  EXPECT_EQ(triax::Fp8Options::from_yaml("recipe: rowwise").recipe, Fp8Recipe::Rowwise);
}

TEST(Fp8LinearCpu, PatternsMatchModuleNames) {
  EXPECT_TRUE(triax::glob_match("*", "model.layers.0.mlp.down_proj"));
  EXPECT_TRUE(triax::glob_match("*.mlp.*", "model.layers.0.mlp.down_proj"));
  EXPECT_TRUE(triax::glob_match("model.layers.1*", "model.layers.11.self_attn.o_proj"));
  EXPECT_FALSE(triax::glob_match("*.mlp.*", "model.layers.0.self_attn.o_proj"));
  EXPECT_FALSE(triax::glob_match("model.layers.1.*", "model.layers.11.mlp.up"));
  EXPECT_TRUE(triax::glob_match("*proj", "a.b_proj"));
  EXPECT_FALSE(triax::glob_match("*proj", "a.proj.b"));
}

// A model of three linears, as a plugin builds one: which compute in fp8 after the conversion
// shows in their outputs (an fp8 product differs from the exact one).
struct ThreeLinears : torch::nn::Module {
  std::shared_ptr<triax::ColumnParallelLinear> up, head;
  std::shared_ptr<triax::RowParallelLinear> down;
  ThreeLinears(int64_t hidden, int64_t width) {
    const triax::TensorParallel tp;
    triax::LinearOptions options{hidden, width};
    up = register_module("up", std::make_shared<triax::ColumnParallelLinear>(options, tp));
    down = register_module("down", std::make_shared<triax::RowParallelLinear>(triax::LinearOptions{width, hidden}, tp));
    options.keeps_model_dtype = true;
    head = register_module("head", std::make_shared<triax::ColumnParallelLinear>(options, tp));
    for (auto& p : parameters()) {
      at::NoGradGuard no_grad;
      p.copy_(seeded(p.sizes().vec(), 9, 0.2));
    }
  }
};

bool computes_exactly(triax::ColumnParallelLinear& layer, const at::Tensor& x) {
  at::NoGradGuard no_grad;
  return at::allclose(layer.forward(x), at::linear(x, layer.weight), 1e-6, 1e-6);
}

TEST(Fp8LinearCpu, TheChosenLinearsComputeInFp8AndTheHeadNever) {
  const at::Tensor x = seeded({2, 4, 32}, 10);
  ThreeLinears all(32, 48);
  triax::convert_linears_to_fp8(all, fp8_context("min_gemm_size: 0"));
  EXPECT_FALSE(computes_exactly(*all.up, x));
  EXPECT_TRUE(computes_exactly(*all.head, x));

  ThreeLinears some(32, 48);
  triax::convert_linears_to_fp8(some, fp8_context("linears: ['dow*']"));
  EXPECT_TRUE(computes_exactly(*some.up, x));
  const at::Tensor hidden = seeded({2, 4, 48}, 11);
  at::NoGradGuard no_grad;
  EXPECT_FALSE(at::allclose(some.down->forward(hidden), at::linear(hidden, some.down->weight), 1e-6, 1e-6));

  ThreeLinears none(32, 48);
  triax::convert_linears_to_fp8(none, triax::ModelContext());  // no fp8 section
  EXPECT_TRUE(computes_exactly(*none.up, x));
}

// Whether ThreeLinears(32, 48)'s `up` ([48, 32]) computes in fp8 after converting with `yaml`.
bool up_in_fp8(const std::string& yaml) {
  ThreeLinears model(32, 48);
  triax::convert_linears_to_fp8(model, fp8_context(yaml));
  return !computes_exactly(*model.up, seeded({2, 4, 32}, 12));
}

// With the default patterns a layer with a side below fp8.min_gemm_size stays in the model's
// dtype (so a layer outside multiples of 16 is not refused); patterns of the config's own take
// exactly the layers they name.
TEST(Fp8LinearCpu, TheDefaultChoiceLeavesLayersBelowTheSizeInTheModelDtype) {
  EXPECT_EQ(triax::Fp8Options::from_yaml("{}").min_gemm_size, 1024);
  EXPECT_FALSE(up_in_fp8("{}"));
  EXPECT_TRUE(up_in_fp8("min_gemm_size: 32"));
  EXPECT_FALSE(up_in_fp8("min_gemm_size: 33"));
  EXPECT_TRUE(up_in_fp8("linears: ['up']\nmin_gemm_size: 4096"));
  ThreeLinears not_16(32, 40);
  EXPECT_NO_THROW(triax::convert_linears_to_fp8(not_16, fp8_context("{}")));
  const std::string negative = error_of("min_gemm_size: -1");
  EXPECT_NE(negative.find("fp8.min_gemm_size"), std::string::npos) << negative;
}

TEST(Fp8LinearCpu, ALayerOutsideMultiplesOf16IsRefusedByName) {
  ThreeLinears model(32, 40);
  try {
    triax::convert_linears_to_fp8(model, fp8_context("recipe: rowwise\nmin_gemm_size: 0"));
    FAIL() << "a [40, 32] layer was converted";
  } catch (const triax::Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("fp8.linears"), std::string::npos) << message;
    EXPECT_NE(message.find("'up'"), std::string::npos) << message;
    EXPECT_NE(message.find("out 40"), std::string::npos) << message;
  }
}

// ---- CUDA -------------------------------------------------------------------------------------

class Fp8LinearCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  }
};

// bf16 operands on the GPU against the fp32 product; 200 tokens (not a multiple of 16) take the
// padded grad_weight path.
TEST_F(Fp8LinearCuda, ForwardAndBackwardFollowTheBf16ProductWithinFp8Tolerance) {
  const auto cuda_bf16 = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  const at::Tensor x = seeded({2, 100, 256}, 11).to(cuda_bf16), weight = seeded({512, 256}, 12, 0.05).to(cuda_bf16);
  const at::Tensor grad_y = seeded({2, 100, 512}, 13).to(cuda_bf16);
  const Products bf16 = run(x, weight, grad_y, nullptr);
  for (Fp8Recipe recipe : kRecipes) {
    const Fp8LinearPlan plan = plan_of(recipe);
    const Products fp8 = run(x, weight, grad_y, &plan);
    EXPECT_EQ(fp8.y.scalar_type(), at::kBFloat16);
    EXPECT_EQ(fp8.grad_weight.scalar_type(), at::kBFloat16);
    expect_fp8_close(fp8, bf16, recipe);
  }
}

// The same bf16 operands through at::_scaled_mm and through the CPU emulation: the quantised
// values and scales are the same, only the accumulation differs. A scale applied to the wrong
// operand or dimension, or a wrong layout, would be far off.
TEST_F(Fp8LinearCuda, ScaledMmEqualsTheCpuEmulation) {
  const at::Tensor x = seeded({160, 128}, 14).to(at::kBFloat16), weight = seeded({96, 128}, 15, 0.05).to(at::kBFloat16);
  const at::Tensor grad_y = seeded({160, 96}, 16).to(at::kBFloat16);
  for (Fp8Recipe recipe : kRecipes) {
    const Fp8LinearPlan plan = plan_of(recipe);
    const Products cpu = run(x, weight, grad_y, &plan);
    const Products gpu = run(x.cuda(), weight.cuda(), grad_y.cuda(), &plan);
    const std::string what = triax::fp8_recipe_name(recipe);
    EXPECT_LT(relative_error(gpu.y, cpu.y), 0.01) << what << " output";
    EXPECT_LT(relative_error(gpu.grad_x, cpu.grad_x), 0.01) << what << " input gradient";
    EXPECT_LT(relative_error(gpu.grad_weight, cpu.grad_weight), 0.01) << what << " weight gradient";
  }
}

}  // namespace
