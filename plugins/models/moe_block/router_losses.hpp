// A model's router losses: the statistics its MoE blocks recorded in one forward
// (MoeBlock::take_statistics), as named auxiliary losses, each the mean over the model's MoE
// layers (a pipeline stage reports its own layers' share, so the pipeline's sum is the mean):
// load_balancing_loss and router_z_loss, each times its coefficient, and the realised expert load
// expert_load_{min,max,cv} (detached: logged, no gradient), relative to the uniform share.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace triax::moe {

class MoeBlock;

struct RouterLossCoefficients {
  double balance = 0.01;  // Hugging Face's router_aux_loss_coef
  double z_loss = 0.0;
};

// The five names, in their order (for a model's aux_loss_names()).
const std::vector<std::string>& router_loss_names();

// Adds the router losses of `blocks` (this stage's MoE blocks; those that recorded nothing are
// skipped) to `aux_losses`; `moe_layers`: the MoE layers of the whole model.
void add_router_losses(const std::vector<std::shared_ptr<MoeBlock>>& blocks, const RouterLossCoefficients& coefficients,
                       int64_t moe_layers, std::map<std::string, at::Tensor>& aux_losses);

}  // namespace triax::moe
