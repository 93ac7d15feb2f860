// The Hugging Face tensor rules of one Mamba-2 mixer (Mamba2Mixer, NemotronHMamba2Mixer alike):
// every tensor keeps its name; in_proj and conv1d, grouped by head group in triax
// (mamba2_mixer.hpp), are interleaved from Hugging Face's part-by-part rows.
#pragma once

#include <string>
#include <vector>

#include "mamba2_mixer_config.hpp"
#include "triax/hf_mapping.hpp"

namespace triax::mamba2 {

// Appends the rules of the mixer whose parameters are named `prefix` + name ("backbone.layers.N.mixer.").
void add_mamba2_mixer_rules(const Mamba2MixerConfig& config, std::vector<HfTensorRule>& rules,
                            const std::string& prefix);

}  // namespace triax::mamba2
