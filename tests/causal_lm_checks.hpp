// Checks every causal LM plugin's unit tests repeat: per-layer recomputation changes neither the
// loss nor any gradient, logits equal a reference's, and the Hugging Face tensor map names every
// parameter with its whole shape.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "triax/causal_lm.hpp"
#include "triax/hf_mapping.hpp"

namespace triax::test {

// `build(recompute)`: the same model (same seed) with parallelism.recompute_layer on or off.
// Loss and every gradient agree to 1e-6.
inline void expect_recomputation_changes_nothing(const std::function<std::shared_ptr<CausalLm>(bool)>& build,
                                                 const at::Tensor& ids, const at::Tensor& labels) {
  std::vector<std::map<std::string, at::Tensor>> grads;
  std::vector<double> losses;
  for (bool recompute : {false, true}) {
    std::shared_ptr<CausalLm> model = build(recompute);
    StageInput input;
    input.input_ids = ids;
    input.label_ids = labels;
    const at::Tensor loss = model->forward(input).loss;
    loss.backward();
    losses.push_back(loss.item<double>());
    std::map<std::string, at::Tensor> g;
    for (const auto& p : model->parameter_table()) {
      ASSERT_TRUE(p.tensor.grad().defined()) << p.name;
      g[p.name] = p.tensor.grad().clone();
    }
    grads.push_back(g);
  }
  EXPECT_NEAR(losses[0], losses[1], 1e-6);
  for (const auto& [name, g] : grads[0])
    EXPECT_LT((g.to(at::kDouble) - grads[1].at(name).to(at::kDouble)).abs().max().item<double>(), 1e-6) << name;
}

// `logits` equal `expected` (1e-4), which is not trivially small.
inline void expect_logits_match(const at::Tensor& logits, const at::Tensor& expected, const std::string& what) {
  ASSERT_EQ(logits.sizes(), expected.sizes()) << what;
  EXPECT_LT((logits.to(at::kDouble) - expected.to(at::kDouble)).abs().max().item<double>(), 1e-4) << what;
  EXPECT_GT(expected.abs().max().item<double>(), 0.1) << what;
}

// The non-optional rules of `mapping`'s tensor map for `model_config_yaml` are exactly `model`'s
// parameters, with their meaningful shapes.
inline void expect_tensor_map_covers_parameters(const HfMapping& mapping, const std::string& model_config_yaml,
                                                CausalLm& model) {
  ConfigReader reader = ConfigReader::from_text(model_config_yaml, "model.model_config");
  std::map<std::string, std::vector<int64_t>> rules;
  for (const HfTensorRule& rule : mapping.tensor_map(reader))
    if (rule.kind != TRIAX_HF_IGNORE && !rule.optional) rules[rule.triax_name] = rule.shape;
  std::map<std::string, std::vector<int64_t>> parameters;
  for (const auto& p : model.parameter_table()) parameters[p.name] = p.spec.meaningful_shape();
  EXPECT_EQ(rules, parameters) << model_config_yaml;
}

}  // namespace triax::test
