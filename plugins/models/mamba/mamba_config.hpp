// model.model_config of a Mamba (Mamba-1) model, read strictly.
//
// The keys are those of nanotron's Mamba example (MambaModelConfig, with its ssm_cfg mapping of
// the selective-scan mixer's settings), with its defaults, plus tie_word_embeddings and the token
// ids a Hugging Face export needs. Keys that only select an implementation detail (fused_add_norm,
// ssm_cfg.use_fast_path, the nanotron-only dtype) are accepted; values that would change the
// model in a way this plugin does not implement are refused with the key's path.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "triax/config_reader.hpp"

namespace triax::mamba {

// ssm_cfg: the mixer of every layer.
struct SsmConfig {
  int64_t d_state = 16;
  int64_t d_conv = 4;
  int64_t expand = 2;
  std::optional<int64_t> dt_rank;  // nullopt: "auto", ceil(d_model / 16)
  double dt_min = 0.001;
  double dt_max = 0.1;
  std::string dt_init = "random";  // dt_proj.weight: "random" U(-s, s) or "constant" s, s = dt_rank^-0.5 * dt_scale
  double dt_scale = 1.0;
  double dt_init_floor = 1e-4;
  bool conv_bias = true;
  bool bias = false;  // in_proj and out_proj biases
  // triax: training's backward forms the conv's output and delta again instead of keeping them
  // (mamba_inner(), as mamba-ssm's mamba_inner_fn): less activation memory for a few % of the step.
  bool recompute_conv = false;
};

struct MambaConfig {
  int64_t d_model = 2560;
  int64_t num_hidden_layers = 64;
  int64_t vocab_size = 50277;
  SsmConfig ssm;
  bool residual_in_fp32 = true;
  int64_t pad_vocab_size_multiple = 8;
  double rms_norm_eps = 1e-5;
  bool tie_word_embeddings = true;
  std::optional<int64_t> pad_token_id;
  int64_t bos_token_id = 0;
  int64_t eos_token_id = 0;

  int64_t d_inner() const { return ssm.expand * d_model; }
  int64_t dt_rank() const { return ssm.dt_rank ? *ssm.dt_rank : (d_model + 15) / 16; }
  // The embedding's rows: vocab_size rounded up to pad_vocab_size_multiple (mamba-ssm's rule; every
  // row is a real, trained row, unlike the tensor-parallel padding on top of it).
  int64_t model_vocab_size() const {
    return (vocab_size + pad_vocab_size_multiple - 1) / pad_vocab_size_multiple * pad_vocab_size_multiple;
  }
  // Pipeline blocks: embedding, one per layer, final norm + lm_head + loss.
  int64_t num_blocks() const { return num_hidden_layers + 2; }

  // Reads and validates every key of `reader` (a model.model_config mapping), then calls
  // reader.finish() (and the ssm_cfg reader's): an unknown key, a wrong type or an impossible
  // value is a ConfigError naming the key's path. Defaults are recorded into reader.resolved().
  static MambaConfig read(ConfigReader& reader);
};

// Forward FLOPs per token of each pipeline block (2 per multiply-add; the scan counted as its
// multiply-adds per state element, the norms and the convolution's few not at all).
std::vector<double> mamba_block_costs(const MambaConfig& config);

}  // namespace triax::mamba
