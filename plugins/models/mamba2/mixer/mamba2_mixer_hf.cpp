#include "mamba2_mixer_hf.hpp"

#include <utility>

namespace triax::mamba2 {

void add_mamba2_mixer_rules(const Mamba2MixerConfig& c, std::vector<HfTensorRule>& rules, const std::string& mixer) {
  const int64_t h = c.hidden_size, d = c.d_inner(), heads = c.num_heads, n = c.state_size;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    rules.push_back(HfTensorRule::rename(mixer + name, std::move(shape)));
  };
  // Grouped by head group in the parameter, part by part in the HF tensor of the same name.
  auto grouped = [&](const std::string& name, std::vector<int64_t> shape, const std::vector<int64_t>& parts) {
    rules.push_back(HfTensorRule::interleave(mixer + name, std::move(shape), 1,
                                             std::vector<std::string>(parts.size(), mixer + name), parts));
  };
  const std::vector<int64_t> conv_parts = {c.group_channels(), n, n};  // x, B, C
  const std::vector<int64_t> projection_parts = {c.group_channels(), c.group_channels(), n, n,
                                                 c.heads_per_group()};  // z, x, B, C, dt
  add("dt_bias", {heads});
  add("A_log", {heads});
  add("D", {heads});
  grouped("conv1d.weight", {c.n_groups, c.group_conv_dim(), 1, c.conv_kernel}, conv_parts);
  if (c.use_conv_bias) grouped("conv1d.bias", {c.n_groups, c.group_conv_dim()}, conv_parts);
  grouped("in_proj.weight", {c.n_groups, c.group_projection_size(), h}, projection_parts);
  if (c.use_bias) grouped("in_proj.bias", {c.n_groups, c.group_projection_size()}, projection_parts);
  add("norm.weight", {d});
  add("out_proj.weight", {h, d});
  if (c.use_bias) add("out_proj.bias", {h});
}

}  // namespace triax::mamba2
