// The Nemotron-H hybrid model (Hugging Face NemotronHForCausalLM) as a triax model plugin: a
// causal LM (triax/causal_lm.hpp) of HybridLayer layers, each the kind its letter of
// hybrid_override_pattern names (Mamba-2 mixer, attention without positions, relu² MLP, the
// shared MoE block), and a final RMSNorm. Parameter names are those of Hugging Face's folders (transformers renames
// backbone. to model. as it loads them):
//   backbone.embeddings.weight
//   backbone.layers.{i}.norm.weight
//   backbone.layers.{i}.mixer.*         (the letter's: mamba2_mixer.hpp, qkv_proj/o_proj, up_proj/down_proj,
//                                        moe_block.hpp)
//   backbone.norm_f.weight
//   lm_head.weight                      (untied embeddings only)
//
// Named auxiliary losses, with E layers: their router losses (router_losses.hpp), with
// model_config's router_aux_loss_coef and router_z_loss_coef.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nemotron_h_config.hpp"
#include "triax/causal_lm.hpp"
#include "triax/config_reader.hpp"
#include "triax/hf_mapping.hpp"

namespace triax::moe {
class MoeBlock;
}

namespace triax::nemotron_h {

class NemotronHModel : public CausalLm {
 public:
  // Forward FLOPs per token of each pipeline block (L + 2 of them).
  static std::vector<double> block_costs(ConfigReader& config, int64_t sequence_length);
  // Reads model.model_config strictly, refuses what the topology cannot split, builds this rank's
  // blocks and initialises them.
  static std::shared_ptr<NemotronHModel> create(ConfigReader& config, const ModelContext& context);
  // What the host asks before any instance exists (triax/plugin.hpp): the pattern's key, as
  // transformers' NemotronHConfig takes it, selects the plugin.
  static constexpr const char* kNanotronMarker = "hybrid_override_pattern";
  static constexpr const char* kFlopsFormula =
      "3 x forward at 2 FLOPs per multiply-add, per layer by its letter: Mamba-2 (in_proj, conv1d, the chunked "
      "SSD, out_proj), attention (q, k, v, o and the scores over the whole sequence, no causal discount), MLP "
      "(up_proj, down_proj), MoE (the router, the top_k routed experts and the shared expert a token passes "
      "through); lm_head";
  // Read strictly, so that a bad model_config is refused naming its key.
  static int64_t vocab_size(ConfigReader& config) { return NemotronHConfig::read(config).vocab_size; }
  static HfMapping hf_mapping();  // NemotronHForCausalLM (hf_mapping.cpp)
  // parallelism.recompute_mlp_activation: its MLPs are the SDK's UngatedMlp, which honours it.
  static constexpr bool kRecomputesMlpActivation = true;

  NemotronHModel(const NemotronHConfig& config, const ModelContext& context, std::string resolved_yaml);

  StageOutput forward(const StageInput& input) override;
  std::vector<std::string> aux_loss_names() const override;
  double flops_per_token(int64_t sequence_length) const override;
  int64_t total_parameters() const override;
  std::string resolved_config() const override { return resolved_yaml_; }

  const NemotronHConfig& config() const { return config_; }

 private:
  NemotronHConfig config_;
  std::string resolved_yaml_;
  std::vector<std::shared_ptr<moe::MoeBlock>> moe_blocks_;  // of this stage's E layers, in layer order
};

}  // namespace triax::nemotron_h
