// The Muon update on one rank: the Newton–Schulz iteration (singular vectors kept, singular values
// brought near 1; the classic cubic set converging to the polar factor), owners balanced by size,
// and the muon optimizer's step against its formula, with AdamW beside it and bf16 parameters.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <string>
#include <vector>

#include "muon_optimizer.hpp"
#include "newton_schulz.hpp"
#include "owner_exchange.hpp"

namespace triax::plugins {
namespace {

const NewtonSchulzCoefficients& coefficients(const char* name) { return *find_newton_schulz_coefficients(name); }

TEST(NewtonSchulz, QuinticKeepsTheSingularVectorsAndBringsTheValuesNearOne) {
  at::manual_seed(3);
  const at::Tensor g = at::randn({1, 24, 40});
  const at::Tensor x = orthogonalise(g, coefficients("quintic"), 5, at::kFloat)[0].to(at::kDouble);
  const auto [u, s, vh] = at::linalg_svd(g[0].to(at::kDouble), /*full_matrices=*/false);
  // In G's singular basis X is diagonal: the iteration only moved the singular values.
  const at::Tensor in_basis = u.t().matmul(x).matmul(vh.t());
  const at::Tensor diagonal = at::diagonal(in_basis);
  EXPECT_LT((in_basis - at::diag(diagonal)).abs().max().item<double>(), 1e-4);
  EXPECT_GT(diagonal.min().item<double>(), 0.6);
  EXPECT_LT(diagonal.max().item<double>(), 1.25);
}

TEST(NewtonSchulz, TheCubicSetConvergesToThePolarFactor) {
  at::manual_seed(4);
  const at::Tensor g = at::randn({1, 16, 24}, at::kDouble).to(at::kFloat);
  const at::Tensor x = orthogonalise(g, coefficients("cubic"), 40, at::kFloat)[0].to(at::kDouble);
  const auto [u, s, vh] = at::linalg_svd(g[0].to(at::kDouble), /*full_matrices=*/false);
  EXPECT_LT((x - u.matmul(vh)).abs().max().item<double>(), 1e-4);
}

TEST(NewtonSchulz, ATallMatrixGivesTheTransposeOfItsWideOne) {
  at::manual_seed(5);
  const at::Tensor g = at::randn({2, 12, 20});
  const at::Tensor wide = orthogonalise(g, coefficients("quintic"), 5, at::kFloat);
  const at::Tensor tall = orthogonalise(g.transpose(1, 2).contiguous(), coefficients("quintic"), 5, at::kFloat);
  EXPECT_EQ(tall.sizes(), (std::vector<int64_t>{2, 20, 12}));
  EXPECT_TRUE(at::allclose(tall.transpose(1, 2), wide, 1e-6, 1e-6));
}

TEST(NewtonSchulz, ABatchEqualsItsMatricesOneByOneAndZeroStaysZero) {
  at::manual_seed(6);
  at::Tensor g = at::randn({3, 8, 8});
  g[1].zero_();
  const at::Tensor batch = orthogonalise(g, coefficients("quintic"), 5, at::kFloat);
  for (int64_t i = 0; i < 3; ++i)
    EXPECT_TRUE(at::allclose(batch[i], orthogonalise(g.narrow(0, i, 1), coefficients("quintic"), 5, at::kFloat)[0],
                             1e-6, 1e-6));
  EXPECT_EQ(batch[1].abs().max().item<float>(), 0.0f);
  EXPECT_EQ(orthogonalise(g, coefficients("quintic"), 5, at::kBFloat16).scalar_type(), at::kBFloat16);
}

TEST(NewtonSchulz, CoefficientSetsAreFoundByName) {
  const NewtonSchulzCoefficients* quintic = find_newton_schulz_coefficients("quintic");
  ASSERT_NE(quintic, nullptr);
  EXPECT_DOUBLE_EQ(quintic->a, 3.4445);
  EXPECT_DOUBLE_EQ(quintic->b, -4.7750);
  EXPECT_DOUBLE_EQ(quintic->c, 2.0315);
  EXPECT_DOUBLE_EQ(find_newton_schulz_coefficients("cubic")->a, 1.5);
  EXPECT_EQ(find_newton_schulz_coefficients("polar"), nullptr);
}

TEST(BalancedOwners, LargestFirstToTheLeastLoadedRank) {
  // 10 -> 0; 8 -> 1; 4 -> 1 (12); 4 -> 0 (14); 1 -> 1 (13); 1 -> 1 (14).
  EXPECT_EQ(balanced_owners({10, 1, 1, 8, 4, 4}, 2), (std::vector<int>{0, 1, 1, 1, 1, 0}));
  EXPECT_EQ(balanced_owners({5, 5, 5}, 4), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(balanced_owners({7, 3}, 1), (std::vector<int>{0, 0}));
}

OptimizerContext context_with(const std::string& factory) {
  OptimizerContext context;
  context.optimizer = YAML::Load("optimizer_factory: " + factory);
  return context;
}

OptimizerParam parameter(const std::string& name, const at::Tensor& value, double weight_decay) {
  OptimizerParam p;
  p.name = name;
  p.param = value;
  p.weight_decay = weight_decay;
  return p;
}

TEST(MuonOptimizer, TwoStepsFollowTheFormulaAndTheVectorTakesAdamW) {
  at::manual_seed(7);
  const at::Tensor matrix = at::randn({6, 4}), vector = at::randn({4});
  const at::Tensor start = matrix.clone(), vector_start = vector.clone();
  MuonOptimizer muon(context_with("{name: muon, momentum: 0.9}"),
                     {parameter("layers.0.proj.weight", matrix, 0.1), parameter("layers.0.norm.weight", vector, 0.0)},
                     /*dp_sharded=*/false, "muon");
  const at::Tensor g1 = at::randn({6, 4}), g2 = at::randn({6, 4});
  const double lr = 0.01, scale = 0.2 * std::sqrt(6.0);
  auto orthogonal = [](const at::Tensor& u) {
    return orthogonalise(u.unsqueeze(0), *find_newton_schulz_coefficients("quintic"), 5, at::kFloat)[0];
  };
  muon.step({g1.clone(), at::ones({4})}, lr);
  // m = g1, Nesterov: u = g1 + 0.9 m; weight decay decoupled.
  at::Tensor expected = start * (1 - lr * 0.1) - lr * scale * orthogonal(g1 * 1.9);
  EXPECT_TRUE(at::allclose(matrix, expected, 1e-6, 1e-6));
  // With the clipping coefficient 0.5: g2 / 2 enters the momentum.
  muon.step_scaled({g2.clone(), at::ones({4})}, lr, at::full({}, 0.5));
  const at::Tensor m2 = g1 * 0.9 + g2 * 0.5;
  expected = expected * (1 - lr * 0.1) - lr * scale * orthogonal(g2 * 0.5 + m2 * 0.9);
  EXPECT_TRUE(at::allclose(matrix, expected, 1e-6, 1e-6));
  EXPECT_FALSE(at::equal(vector, vector_start));  // AdamW moved it
}

TEST(MuonOptimizer, LowPrecisionParametersKeepAnFp32MasterInTheState) {
  const at::Tensor matrix = at::randn({8, 8}).to(at::kBFloat16), vector = at::randn({8}).to(at::kBFloat16);
  MuonOptimizer muon(context_with("{name: muon, nesterov: false}"),
                     {parameter("proj.weight", matrix, 0.0), parameter("norm.weight", vector, 0.0)}, false, "muon");
  muon.step({at::randn({8, 8}).to(at::kBFloat16), at::randn({8}).to(at::kBFloat16)}, 0.01);
  std::vector<std::string> names;
  for (const OptimizerState& s : muon.state()) names.push_back(std::to_string(s.param_index) + ":" + s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"0:master", "0:momentum", "1:master", "1:exp_avg", "1:exp_avg_sq",
                                             "1:step"}));
  const at::Tensor master = muon.state()[0].tensor;
  EXPECT_TRUE(at::equal(matrix.view(-1), master.to(at::kBFloat16)));
  master.add_(1.0);  // a loaded checkpoint: the parameter follows its master
  muon.state_loaded();
  EXPECT_TRUE(at::equal(matrix.view(-1), master.to(at::kBFloat16)));
  EXPECT_EQ(muon.state_bytes(), 4 * (64 + 64 + 8 + 8 + 8));
}

}  // namespace
}  // namespace triax::plugins
