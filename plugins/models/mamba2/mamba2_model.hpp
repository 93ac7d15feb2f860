// The Mamba-2 model (Hugging Face Mamba2ForCausalLM) as a triax model plugin: a causal LM
// (triax/causal_lm.hpp) of SsmBlock layers (mamba/ssm_block.hpp) around Mamba2Mixer and a final
// RMSNorm, no attention and no positions.
// Parameter names are Hugging Face's:
//   backbone.embeddings.weight
//   backbone.layers.{i}.norm.weight
//   backbone.layers.{i}.mixer.{dt_bias, A_log, D, conv1d.*, in_proj.*, norm.weight, out_proj.*}
//   backbone.norm_f.weight
//   lm_head.weight                      (untied embeddings only)
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "mamba2_config.hpp"
#include "triax/causal_lm.hpp"
#include "triax/config_reader.hpp"
#include "triax/hf_mapping.hpp"

namespace triax::mamba2 {

class Mamba2Model : public CausalLm {
 public:
  // Forward FLOPs per token of each pipeline block (L + 2 of them).
  static std::vector<double> block_costs(ConfigReader& config, int64_t sequence_length);
  // Reads model.model_config strictly, refuses what the topology cannot split, builds this rank's
  // blocks and initialises them.
  static std::shared_ptr<Mamba2Model> create(ConfigReader& config, const ModelContext& context);
  // What the host asks before any instance exists (triax/plugin.hpp).
  static constexpr const char* kNanotronMarker = "is_mamba2_config";
  static constexpr const char* kFlopsFormula =
      "3 x forward at 2 FLOPs per multiply-add: in_proj, conv1d, the chunked SSD (C.B per group and the "
      "weighted sum per head over about chunk_size / 2 positions, 2 x d_inner x state_size for the chunk "
      "states), out_proj, lm_head";
  // Read strictly, so that a bad model_config is refused naming its key (not by the data loader).
  static int64_t vocab_size(ConfigReader& config) { return Mamba2Config::read(config).vocab_size; }
  static HfMapping hf_mapping();  // Mamba2ForCausalLM (hf_mapping.cpp)

  Mamba2Model(const Mamba2Config& config, const ModelContext& context, std::string resolved_yaml);

  double flops_per_token(int64_t sequence_length) const override;
  int64_t total_parameters() const override;
  std::string resolved_config() const override { return resolved_yaml_; }

  const Mamba2Config& config() const { return config_; }

 private:
  Mamba2Config config_;
  std::string resolved_yaml_;
};

}  // namespace triax::mamba2
