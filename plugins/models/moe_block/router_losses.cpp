#include "router_losses.hpp"

#include <algorithm>

#include "moe_block.hpp"

namespace triax::moe {

const std::vector<std::string>& router_loss_names() {
  static const std::vector<std::string> names = {"load_balancing_loss", "router_z_loss", "expert_load_min",
                                                 "expert_load_max", "expert_load_cv"};
  return names;
}

void add_router_losses(const std::vector<std::shared_ptr<MoeBlock>>& blocks, const RouterLossCoefficients& coefficients,
                       int64_t moe_layers, std::map<std::string, at::Tensor>& aux_losses) {
  const double share = 1.0 / static_cast<double>(std::max<int64_t>(1, moe_layers));
  at::Tensor sums[5];
  for (const auto& block : blocks) {
    std::optional<RouterStatistics> s = block->take_statistics();
    if (!s) continue;
    const at::Tensor values[5] = {s->balance * coefficients.balance, s->z_loss * coefficients.z_loss,
                                  s->load_min.detach(), s->load_max.detach(), s->load_cv.detach()};
    for (int i = 0; i < 5; ++i) sums[i] = sums[i].defined() ? sums[i] + values[i] * share : values[i] * share;
  }
  for (size_t i = 0; i < 5; ++i)
    if (sums[i].defined()) aux_losses[router_loss_names()[i]] = sums[i];
}

}  // namespace triax::moe
