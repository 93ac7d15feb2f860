// The optimizer interface plugin authors implement. The host hands over gradients accumulated
// over the step's micro-batches and averaged across data parallel ranks; the optimizer updates
// its parameters (and keeps master weights and moments as it sees fit).
//
// step_scaled() is what the host calls (ABI 1.8): the gradients in fp32, or in the parameter's
// dtype when one micro-batch left nothing to sum in fp32, with the clipping coefficient beside
// them. Its default converts and scales them and calls step(), which then sees fp32 gradients,
// already clipped; an optimizer overrides step_scaled() to read them as they are instead.
//
// An optimizer that shards its state ZeRO-style declares
//     static constexpr triax_gradient_sharding kGradientSharding = TRIAX_GRADIENTS_DP_SHARDED;
// and then receives, per parameter, only this dp rank's shard of the gradient (1-D, see
// triax/zero_partition.hpp); it all-gathers the updated parameters over the dp group itself.
#pragma once

#include <ATen/core/Tensor.h>
#include <yaml-cpp/yaml.h>

#include <string>
#include <utility>
#include <vector>

#include "triax/abi.h"
#include "triax/host.hpp"

namespace triax {

struct OptimizerParam {
  std::string name;
  at::Tensor param;
  double weight_decay = 0.0;  // resolved: 0 where excluded
  uint32_t flags = 0;
  // The group its gradient is averaged over (ABI 1.3): TRIAX_GROUP_DP, or TRIAX_GROUP_EDP for an
  // expert shard. A ZeRO optimizer shards and all-gathers the parameter over this group.
  triax_group gradient_group = TRIAX_GROUP_DP;
  // The factor on the step's learning rate for this parameter (ABI 1.5; spectral muP).
  double lr_scale = 1.0;
  // Where `param` sits in the whole parameter (ABI 1.12): the whole shape and this rank's
  // shard's first index per dimension. Empty from an older host: `param` is taken as whole.
  std::vector<int64_t> global_shape, shard_offset;
};

struct OptimizerContext {
  int dp_rank = 0, dp_size = 1;
  YAML::Node optimizer;  // the whole `optimizer` section
  Host host;
  static OptimizerContext from_c(const triax_optimizer_context& context);
};

// One tensor of optimizer state, for the checkpoint store: a live tensor the host reads to save
// and copies into to load. See triax_optimizer_state in abi.h.
struct OptimizerState {
  int64_t param_index = 0;  // as numbered at create
  std::string name;         // "exp_avg", "exp_avg_sq", "master", "step", ...
  at::Tensor tensor;
  int64_t element_offset = 0;   // elementwise state: first element of the flattened parameter covered
  bool per_parameter = false;   // one value per parameter (a step counter) instead of elementwise
};

// The gradients step() expects from those step_scaled() gets: fp32 copies of the low-precision
// ones (exact), fp32 and fp64 ones as they are, each multiplied in place by grad_scale (undefined
// = 1), as clipping in place did.
std::vector<at::Tensor> clipped_full_precision(const std::vector<at::Tensor>& grads, const at::Tensor& grad_scale);

class Optimizer {
 public:
  // What step() receives; a subclass redeclares it to change it (read at registration).
  static constexpr triax_gradient_sharding kGradientSharding = TRIAX_GRADIENTS_WHOLE;

  virtual ~Optimizer() = default;
  // grads[i] (fp32, or fp64 for fp64 parameters; clipped) belongs to the i-th parameter given at
  // creation (its dp shard when sharding).
  virtual void step(const std::vector<at::Tensor>& grads, double learning_rate) = 0;
  // grads[i] in fp32 or in the i-th parameter's dtype, not clipped: each is to be multiplied by
  // grad_scale (a 0-dim fp32 tensor on their device; undefined = 1) in fp32. The step may
  // overwrite grads. Default: fp32 copies of low-precision gradients, each multiplied by
  // grad_scale in place, then step().
  virtual void step_scaled(const std::vector<at::Tensor>& grads, double learning_rate, const at::Tensor& grad_scale);
  virtual int64_t state_bytes() const = 0;

  // Every state tensor (live; created at construction, so the list never changes). Default: no
  // state, and checkpoints then hold none for this optimizer.
  virtual std::vector<OptimizerState> state() { return {}; }
  // After the host loaded values into the state tensors: refresh what derives from them.
  virtual void state_loaded() {}
  // optimizer_factory with every default filled in, as YAML (ABI 1.12), for the run folder's
  // config.yaml; empty: the section as given.
  virtual std::string resolved_config() const { return {}; }
  // QK-clip (ABI 1.12): the threshold on attention logits, or 0 when off.
  virtual double qk_clip_threshold() const { return 0.0; }
  // Multiplies each parameter (its index at creation) by its factor, broadcastable to the whole
  // parameter, and with it what the optimizer keeps of it (masters). Default: refused.
  virtual void scale_parameters(const std::vector<std::pair<int64_t, at::Tensor>>& factors);

  // state(), computed once (what the C adapters enumerate).
  const std::vector<OptimizerState>& state_table();
  // resolved_config(), computed once (the C adapter hands out its characters).
  const std::string& resolved_config_text();

 private:
  std::vector<OptimizerState> state_table_;
  bool state_table_ready_ = false;
  std::string resolved_config_text_;
  bool resolved_config_ready_ = false;
};

}  // namespace triax
