#include "moe_block.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "triax/environment_switch.hpp"
#include "triax/layers/recompute.hpp"
#include "triax/layers/swiglu_mlp.hpp"
#include "triax/layers/tensor_parallel_ops.hpp"
#include "triax/layers/ungated_mlp.hpp"

namespace triax::moe {

SharedExpertGate::SharedExpertGate(int64_t hidden_size, const ModelContext& context)
    : tp_(TensorParallel::of(context)) {
  at::Tensor value = at::empty({1, hidden_size}, at::TensorOptions().device(context.device).dtype(context.dtype));
  weight = register_parameter_with_spec("weight", value, ParameterSpec::replicated(value, 0, ParameterRole::Matrix));
}

at::Tensor SharedExpertGate::forward(const at::Tensor& x) {
  return at::sigmoid(at::linear(x, replicated_on_sequence_shard(weight, tp_)));
}

MoeBlock::MoeBlock(const MoeBlockOptions& o, const ModelContext& context)
    : top_k_(o.top_k),
      recomputed_(context.recompute_moe_layers),
      one_ep_rank_(context.ep_size == 1),
      dispatcher_(o.dispatcher, o.num_experts, context) {
  // Registration order gives the Hugging Face parameter order.
  gate = register_module("gate", std::make_shared<TopKRouter>(o, context));
  experts = register_module("experts", std::make_shared<GroupedExperts>(o.num_experts, o.hidden_size,
                                                                        o.expert_intermediate_size, o.activation, context));
  if (o.shared_expert == SharedExpert::None) return;
  const int64_t h = o.hidden_size, f = o.shared_expert_intermediate_size;
  shared_expert =
      o.activation == ExpertActivation::SwiGlu
          ? UnaryModule::of(std::make_shared<SwiGluMlp>(h, f, context))
          : UnaryModule::of(std::make_shared<UngatedMlp>(h, f, UngatedMlpOptions::relu_squared(false), context));
  register_module("shared_expert", shared_expert.module);
  if (o.shared_expert == SharedExpert::Gated)
    shared_expert_gate = register_module("shared_expert_gate", std::make_shared<SharedExpertGate>(h, context));
}

at::Tensor MoeBlock::forward(const at::Tensor& x) {
  if (!recomputed_ || !is_training()) return route_and_combine(x);
  return recompute([this](const std::vector<at::Tensor>& in) { return route_and_combine(in[0]); }, {x}, parameters());
}

at::Tensor MoeBlock::route_and_combine(const at::Tensor& x) {
  const int64_t hidden = x.size(-1);
  const at::Tensor tokens = x.reshape({-1, hidden});
  const Routing routing = gate->route(tokens);
  if (is_training() && SideOutput::wanted()) {
    const RouterStatistics s = gate->statistics(routing);
    statistics_.set({s.balance, s.z_loss, s.load_min, s.load_max, s.load_cv});
  }

  // One row per (token, slot): token t's slot j is row t * top_k + j.
  const int64_t n = tokens.size(0);
  const at::Tensor chosen = routing.experts.reshape({-1});
  at::Tensor outputs;
  if (serves_by_expert(n)) {
    // The rows without an index op: repeat_interleave would wait for the host.
    outputs = experts->forward_by_expert(tokens.unsqueeze(1).expand({n, top_k_, hidden}).reshape({-1, hidden}), chosen);
  } else {
    const at::Tensor owner = at::arange(n, routing.experts.options()).repeat_interleave(top_k_);
    outputs = dispatcher_.run(
        tokens.index_select(0, owner), chosen,
        [this](const at::Tensor& rows, const std::vector<int64_t>& counts) { return experts->forward(rows, counts); });
  }
  // The gates multiply on the token's own rank, so the router's gradient never crosses ranks.
  at::Tensor combined =
      (outputs.reshape({n, top_k_, hidden}) * routing.gates.to(outputs.scalar_type()).unsqueeze(-1)).sum(1);
  at::Tensor out = combined.reshape(x.sizes());
  if (shared_expert_gate)
    out = out + shared_expert_gate->forward(x) * shared_expert.forward(x);
  else if (shared_expert.module)
    out = out + shared_expert.forward(x);
  return out;
}

bool MoeBlock::serves_by_expert(int64_t tokens) const {
  static const bool on = switched_on_unless_zero("TRIAX_MOE_DECODE_BY_EXPERT");
  return on && !is_training() && !at::GradMode::is_enabled() && one_ep_rank_ && !experts->computes_in_fp8() &&
         tokens * top_k_ <= experts->local_experts();
}

std::optional<RouterStatistics> MoeBlock::take_statistics() {
  std::optional<std::vector<at::Tensor>> values = statistics_.take();
  if (!values) return std::nullopt;
  const std::vector<at::Tensor>& v = *values;
  return RouterStatistics{v[0], v[1], v[2], v[3], v[4]};
}

}  // namespace triax::moe
