// model.model_config of a Mamba-2 model, read strictly.
//
// The keys are Hugging Face's Mamba2Config's, with its defaults, so that a config.json translates
// key for key, plus the marker is_mamba2_config; the mixer's keys fill its Mamba2MixerConfig. The
// mixer's width is num_heads x head_dim, which must equal expand x hidden_size; B and C are
// shared by n_groups groups of heads.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "mamba2_mixer_config.hpp"
#include "triax/config_reader.hpp"

namespace triax::mamba2 {

struct Mamba2Config : Mamba2MixerConfig {
  int64_t num_hidden_layers = 64;
  int64_t vocab_size = 32768;
  int64_t expand = 2;
  bool residual_in_fp32 = true;
  bool tie_word_embeddings = false;
  std::optional<int64_t> pad_token_id;
  int64_t bos_token_id = 0;
  int64_t eos_token_id = 2;

  // Pipeline blocks: embedding, one per layer, final norm + lm_head + loss.
  int64_t num_blocks() const { return num_hidden_layers + 2; }

  // Reads and validates every key of `reader` (a model.model_config mapping), then calls
  // reader.finish(): an unknown key, a wrong type or an impossible value is a ConfigError naming
  // the key's path. Defaults are recorded into reader.resolved().
  static Mamba2Config read(ConfigReader& reader);
};

// Forward FLOPs per token of each pipeline block at `sequence_length` (2 per multiply-add).
std::vector<double> mamba2_block_costs(const Mamba2Config& config, int64_t sequence_length);

}  // namespace triax::mamba2
