// The triax side of nemotron_h_moe_test.py: builds a MoE block from the options in the metadata of
// FOLDER/inputs.safetensors, loads the Hugging Face weights of FOLDER/hf through the block's
// tensor rules (Nemotron-H's names), runs x forward and (out * loss_weights).sum() backward, and
// writes the output, x's gradient and every parameter's gradient (grad.<name>) to
// FOLDER/triax.safetensors.
//   nemotron_h_moe_check FOLDER
#include <ATen/ATen.h>

#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "moe_block.hpp"
#include "moe_block_hf.hpp"
#include "triax/error.hpp"
#include "triax/interop/safetensors.hpp"
#include "triax/interop/tensor_map.hpp"

namespace {

using triax::moe::MoeBlockOptions;

MoeBlockOptions options_of(const std::map<std::string, std::string>& m) {
  auto integer = [&](const char* key) { return std::stoll(m.at(key)); };
  MoeBlockOptions o;
  o.hidden_size = integer("hidden_size");
  o.num_experts = integer("num_experts");
  o.top_k = integer("top_k");
  o.expert_intermediate_size = integer("expert_intermediate_size");
  o.score = triax::moe::router_score_of(m.at("score"));
  o.n_group = integer("n_group");
  o.topk_group = integer("topk_group");
  o.norm_topk_prob = m.at("norm_topk_prob") == "true";
  o.routed_scaling_factor = std::stod(m.at("routed_scaling_factor"));
  o.activation = triax::moe::expert_activation_of(m.at("activation"));
  o.shared_expert = triax::moe::SharedExpert::Ungated;
  o.shared_expert_intermediate_size = integer("shared_expert_intermediate_size");
  o.check([](const std::string& field, const std::string& why) {
    throw triax::Error(TRIAX_ERROR_INVALID_ARGUMENT, field + ": " + why);
  });
  return o;
}

void run(const std::string& folder) {
  const triax::interop::SafetensorsFile inputs(folder + "/inputs.safetensors");
  const MoeBlockOptions options = options_of(inputs.metadata());
  triax::moe::MoeBlock block(options, triax::ModelContext{});
  const triax::interop::TensorMap map(
      triax::moe::moe_block_hf_rules(options, "", "", triax::moe::MoeHfNames::nemotron_h()), "nemotron_h_moe_check");
  const auto weights = map.read(triax::interop::HfWeights(folder + "/hf"), folder + "/hf/config.json");
  {
    at::NoGradGuard no_grad;
    for (auto& p : block.named_parameters()) p.value().copy_(weights.parameters.at(p.key()));
  }
  const at::Tensor x = inputs.read("x").requires_grad_(true);
  const at::Tensor out = block.forward(x);
  (out * inputs.read("loss_weights")).sum().backward();
  std::vector<std::pair<std::string, at::Tensor>> results{{"out", out.detach()}, {"x_grad", x.grad()}};
  for (const auto& p : block.named_parameters())
    if (p.value().grad().defined()) results.emplace_back("grad." + p.key(), p.value().grad());
  triax::interop::write_safetensors(folder + "/triax.safetensors", results);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: nemotron_h_moe_check FOLDER\n";
    return 2;
  }
  try {
    run(argv[1]);
  } catch (const std::exception& e) {
    std::cerr << "nemotron_h_moe_check: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
