#include "run_check.hpp"

#include "triax/convert/hf_model_format.hpp"
#include "triax/core/comm/communicator.hpp"
#include "triax/core/plugins/plugin_choice.hpp"
#include "triax/core/plugins/plugin_contexts.hpp"
#include "triax/core/plugins/plugin_instances.hpp"
#include "triax/data/source_registry.hpp"
#include "triax/error.hpp"

namespace triax {
void check_run(TrainConfig& config, const PluginRegistry& registry) {
  const HfModelFormat hf_folders;
  const PluginChoice plugins = choose_plugins(config, registry, &hf_folders);
  const TrainConfig& c = config;
  data::check_source_names(c);  // the data itself is opened by the run
  // The engine and the optimizer read their sections when made; as pipeline rank 0 and data
  // rank 0 of the config's mesh, the optimizer over no parameters.
  SingleProcessCommunicator communicator;
  HostServices host(communicator);
  const PluginContexts contexts(c, RankPlace::first_of(c), host);
  in_config_file(c.origin, [&] {
    ModelInstance::vocab_size(*plugins.model, c.model.plugin, contexts.model_yaml());
    ModelInstance::describe_blocks(*plugins.model, c.model.plugin, contexts.model_yaml(), c.tokens.sequence_length);
  });
  in_config_file(c.origin, [&] { EngineInstance engine(*plugins.engine, c.parallelism.pp_engine, contexts.engine()); });
  in_config_file(c.origin,
                 [&] { OptimizerInstance optimizer(*plugins.optimizer, c.optimizer.plugin, contexts.optimizer({}, {}), {}); });
}

}  // namespace triax
