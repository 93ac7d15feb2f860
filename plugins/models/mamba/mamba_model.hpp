// The Mamba-1 model (Hugging Face MambaForCausalLM) as a triax model plugin: a causal LM
// (triax/causal_lm.hpp) of SsmBlock layers (ssm_block.hpp) around MambaMixer and a final RMSNorm,
// no attention and no positions.
// Parameter names are Hugging Face's (see mamba_mixer.hpp for the one shape that differs):
//   backbone.embeddings.weight
//   backbone.layers.{i}.norm.weight
//   backbone.layers.{i}.mixer.{A_log, D, conv1d.*, in_proj.*, x_proj.weight, dt_proj.*, out_proj.*}
//   backbone.norm_f.weight
//   lm_head.weight                      (untied embeddings only)
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "mamba_config.hpp"
#include "triax/causal_lm.hpp"
#include "triax/config_reader.hpp"
#include "triax/hf_mapping.hpp"

namespace triax::mamba {

class MambaModel : public CausalLm {
 public:
  // Forward FLOPs per token of each pipeline block (L + 2 of them).
  static std::vector<double> block_costs(ConfigReader& config, int64_t sequence_length);
  // Reads model.model_config strictly, builds this rank's blocks and initialises them.
  static std::shared_ptr<MambaModel> create(ConfigReader& config, const ModelContext& context);
  // What the host asks before any instance exists (triax/plugin.hpp).
  static constexpr const char* kNanotronMarker = "is_mamba_config";
  static constexpr const char* kFlopsFormula =
      "3 x forward at 2 FLOPs per multiply-add: in_proj, conv1d, x_proj, dt_proj, 3 x d_inner x d_state per "
      "token for the scan, out_proj, lm_head";
  // The vocabulary the logits cover: vocab_size rounded up to pad_vocab_size_multiple.
  static int64_t vocab_size(ConfigReader& config) { return MambaConfig::read(config).model_vocab_size(); }
  static HfMapping hf_mapping();  // MambaForCausalLM (hf_mapping.cpp)

  MambaModel(const MambaConfig& config, const ModelContext& context, std::string resolved_yaml);

  double flops_per_token(int64_t sequence_length) const override;
  int64_t total_parameters() const override;
  std::string resolved_config() const override { return resolved_yaml_; }

  const MambaConfig& config() const { return config_; }

 protected:
  // A decoding step's layers read and write their states in place and wait for nothing on the
  // host (MambaMixer::forward_cached): it may run as a CUDA graph.
  bool captures_decode_steps(int64_t) const override { return true; }

 private:
  MambaConfig config_;
  std::string resolved_yaml_;
};

}  // namespace triax::mamba
