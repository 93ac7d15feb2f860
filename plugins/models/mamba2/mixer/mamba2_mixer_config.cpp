#include "mamba2_mixer_config.hpp"

#include <algorithm>

namespace triax::mamba2 {

double Mamba2MixerConfig::multiply_adds_per_token(int64_t sequence_length) const {
  const double h = static_cast<double>(hidden_size), d = static_cast<double>(d_inner());
  const double n = static_cast<double>(state_size), heads = static_cast<double>(num_heads);
  const double groups = static_cast<double>(n_groups), p = static_cast<double>(head_dim);
  // The chunked SSD per token: within its chunk, C.B per group and the score-weighted sum of x per
  // head (about chunk / 2 earlier positions each); the chunk state's outer products x B and the
  // read-out C . state per head.
  const double chunk = static_cast<double>(std::min<int64_t>(chunk_size, std::max<int64_t>(sequence_length, 1)));
  const double ssd = 0.5 * chunk * (groups * n + heads * p) + 2.0 * d * n;
  return h * static_cast<double>(projection_size()) + static_cast<double>(conv_dim() * conv_kernel) + ssd + d * h;
}

}  // namespace triax::mamba2
