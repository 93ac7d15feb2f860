#include "triax/core/plugins/plugin_contexts.hpp"

#include "triax/located_yaml.hpp"
#include "triax/core/comm/communicator.hpp"

namespace triax {

triax_model_context mesh_model_context(const Communicator& communicator) {
  triax_model_context context{};
  context.struct_size = sizeof(context);
  context.tp_rank = communicator.rank(TRIAX_GROUP_TP);
  context.tp_size = communicator.size(TRIAX_GROUP_TP);
  context.pp_rank = communicator.rank(TRIAX_GROUP_PP);
  context.pp_size = communicator.size(TRIAX_GROUP_PP);
  context.dp_rank = communicator.rank(TRIAX_GROUP_DP);
  context.dp_size = communicator.size(TRIAX_GROUP_DP);
  context.ep_rank = communicator.rank(TRIAX_GROUP_EP);
  context.ep_size = communicator.size(TRIAX_GROUP_EP);
  context.edp_rank = communicator.rank(TRIAX_GROUP_EDP);
  context.edp_size = communicator.size(TRIAX_GROUP_EDP);
  context.cp_rank = communicator.rank(TRIAX_GROUP_CP);
  context.cp_size = communicator.size(TRIAX_GROUP_CP);
  return context;
}

RankPlace RankPlace::of(const Communicator& communicator) {
  return {communicator.rank(TRIAX_GROUP_PP), communicator.size(TRIAX_GROUP_PP), communicator.rank(TRIAX_GROUP_DP),
          communicator.size(TRIAX_GROUP_DP)};
}

RankPlace RankPlace::first_of(const TrainConfig& config) {
  return {0, static_cast<int32_t>(config.parallelism.pp), 0, static_cast<int32_t>(config.parallelism.dp)};
}

PluginContexts::PluginContexts(const TrainConfig& config, RankPlace place, const HostServices& host)
    : config_(config), place_(place), host_(host.c_host()), sends_buffered_(host.communicator().buffers_sends()) {
  const TrainConfig& c = config;
  model_yaml_ = to_located_yaml_text(c.model.model_config, c.origin);
  // init_method.path is the host's business: the plugin initialises as usual and is then overwritten.
  const YAML::Node& init_method = c.model.init_method;
  if (init_method.IsMap() && init_method["path"]) init_path_ = init_method["path"].as<std::string>();
  init_method_yaml_ = to_located_yaml_text(init_method, c.origin, {"path"});
  parallelism_yaml_ = to_located_yaml_text(c.parallelism.section, c.origin);
  optimizer_yaml_ = to_located_yaml_text(c.optimizer.section, c.origin);
}

triax_engine_context PluginContexts::engine() const {
  triax_engine_context context{};
  context.struct_size = sizeof(context);
  context.pp_rank = place_.pp_rank;
  context.pp_size = place_.pp_size;
  context.parallelism_yaml = parallelism_yaml_.c_str();
  context.host = host_;
  context.micro_batches = static_cast<int32_t>(config_.tokens.batch_accumulation_per_replica);
  context.places_chunks = 1;  // ModelChunks places them as EngineInstance::chunk_placement says
  context.sends_buffered = sends_buffered_ ? 1 : 0;
  return context;
}

triax_model_context PluginContexts::model(const Communicator& communicator, const std::string& device_name) const {
  const TrainConfig& c = config_;
  triax_model_context context = mesh_model_context(communicator);
  context.device = device_name.c_str();
  context.dtype = c.model.dtype.c_str();
  context.seed = static_cast<uint64_t>(c.general.seed);
  context.init_method_yaml = init_method_yaml_.c_str();
  context.tp_mode = c.parallelism.tp_mode == "REDUCE_SCATTER" ? 1 : 0;
  context.make_vocab_size_divisible_by = c.model.make_vocab_size_divisible_by;
  context.host = host_;
  context.recompute_layer = c.parallelism.recompute_layer ? 1 : 0;
  context.recompute_layer_count = static_cast<int32_t>(c.parallelism.recompute_num_layers.value_or(0));
  // With one tp rank there is nothing to overlap: the layers keep their plain path.
  context.tp_linear_async_communication = c.parallelism.tp_linear_async_communication && c.parallelism.tp > 1;
  context.recompute_mlp_activation = c.parallelism.recompute_mlp_activation ? 1 : 0;
  context.zero_stage = static_cast<int32_t>(c.optimizer.zero_stage);
  context.cp_ring_attention = c.parallelism.context_parallel_attention == "ring" ? 1 : 0;
  context.fp8_yaml = c.fp8_yaml ? c.fp8_yaml->c_str() : nullptr;
  context.recompute_moe_layers = c.parallelism.moe_layer_recompute ? 1 : 0;
  return context;
}

triax_optimizer_context PluginContexts::optimizer(const std::vector<int32_t>& gradient_groups,
                                                  const std::vector<double>& lr_scales,
                                                  const std::vector<triax_parameter_layout>& layouts) const {
  triax_optimizer_context context{};
  context.struct_size = sizeof(context);
  context.dp_rank = place_.dp_rank;
  context.dp_size = place_.dp_size;
  context.optimizer_yaml = optimizer_yaml_.c_str();
  context.host = host_;
  context.gradient_groups = gradient_groups.empty() ? nullptr : gradient_groups.data();
  context.lr_scales = lr_scales.empty() ? nullptr : lr_scales.data();
  context.layouts = layouts.empty() ? nullptr : layouts.data();
  return context;
}

}  // namespace triax
