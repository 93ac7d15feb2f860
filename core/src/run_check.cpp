#include "triax/core/run_check.hpp"

#include "triax/core/comm/communicator.hpp"
#include "triax/core/plugins/plugin_choice.hpp"
#include "triax/core/plugins/plugin_instances.hpp"
#include "triax/error.hpp"
#include "triax/located_yaml.hpp"

namespace triax {
void check_run(TrainConfig& config, const PluginRegistry& registry) {
  const PluginChoice plugins = choose_plugins(config, registry);
  const TrainConfig& c = config;
  const std::string model_yaml = to_located_yaml_text(c.model.model_config, c.origin);
  in_config_file(c.origin, [&] {
    ModelInstance::vocab_size(*plugins.model, c.model.plugin, model_yaml);
    ModelInstance::describe_blocks(*plugins.model, c.model.plugin, model_yaml, c.tokens.sequence_length);
  });

  // The engine and the optimizer read their sections when made; as pipeline rank 0 and data
  // rank 0 of the config's mesh, the optimizer over no parameters.
  SingleProcessCommunicator communicator;
  HostServices host(communicator);
  const std::string parallelism_yaml = to_located_yaml_text(c.parallelism.section, c.origin);
  triax_engine_context engine_context{};
  engine_context.struct_size = sizeof(engine_context);
  engine_context.pp_rank = 0;
  engine_context.pp_size = static_cast<int32_t>(c.parallelism.pp);
  engine_context.parallelism_yaml = parallelism_yaml.c_str();
  engine_context.host = host.c_host();
  engine_context.micro_batches = static_cast<int32_t>(c.tokens.batch_accumulation_per_replica);
  in_config_file(c.origin, [&] { EngineInstance engine(*plugins.engine, c.parallelism.pp_engine, engine_context); });

  const std::string optimizer_yaml = to_located_yaml_text(c.optimizer.section, c.origin);
  triax_optimizer_context optimizer_context{};
  optimizer_context.struct_size = sizeof(optimizer_context);
  optimizer_context.dp_rank = 0;
  optimizer_context.dp_size = static_cast<int32_t>(c.parallelism.dp);
  optimizer_context.optimizer_yaml = optimizer_yaml.c_str();
  optimizer_context.host = host.c_host();
  in_config_file(c.origin, [&] { OptimizerInstance optimizer(*plugins.optimizer, c.optimizer.plugin, optimizer_context, {}); });
}

}  // namespace triax
