#include "triax/core/plugins/plugin_choice.hpp"

#include "triax/core/plugins/model_selection.hpp"
#include "triax/core/plugins/plugin_registry.hpp"
#include "triax/error.hpp"

namespace triax {
namespace {

// Runs a registry lookup; its refusal is put behind the config key that named the plugin.
template <class Lookup>
auto named_by(const TrainConfig& config, const std::string& key_path, Lookup&& lookup, const std::string& also = "") {
  try {
    return &lookup();
  } catch (const PluginError& e) {
    throw PluginError((config.origin.empty() ? "" : config.origin + ": ") + key_path + also + ": " + e.what());
  }
}

}  // namespace

PluginChoice choose_plugins(TrainConfig& config, const PluginRegistry& registry, const ExternalModelFormat* external) {
  resolve_model_section(config, registry, external);
  const TrainConfig& c = config;
  PluginChoice choice;
  choice.model = named_by(c, "model.plugin", [&]() -> const triax_model_vtable& { return registry.model(c.model.plugin); });
  choice.engine = named_by(c, "parallelism.pp_engine",
                           [&]() -> const triax_engine_vtable& { return registry.engine(c.parallelism.pp_engine); });
  // zero_stage picks the variant (zero1_adamw): the message says so.
  const int64_t stage = c.optimizer.zero_stage;
  const std::string with_stage = stage > 0 ? " with optimizer.zero_stage " + std::to_string(stage) : "";
  choice.optimizer = named_by(
      c, "optimizer.optimizer_factory.name",
      [&]() -> const triax_optimizer_vtable& { return registry.optimizer(c.optimizer.plugin); }, with_stage);
  // The variant must shard what its stage promises: ZeRO-3 models keep their parameters as
  // shards, which only an optimizer taking them (TRIAX_GRADIENTS_PARAMETERS_SHARDED) can step.
  const int32_t sharding = optimizer_gradient_sharding(*choice.optimizer);
  const bool parameters_sharded = sharding == TRIAX_GRADIENTS_PARAMETERS_SHARDED;
  if (parameters_sharded != (stage == 3))
    throw PluginError((c.origin.empty() ? "" : c.origin + ": ") + "optimizer.zero_stage: " + std::to_string(stage) +
                      " selects the optimizer plugin '" + c.optimizer.plugin + "', which " +
                      (parameters_sharded ? "takes ZeRO-3 parameter shards (only zero_stage 3 gives them)"
                                          : "does not declare ZeRO-3 parameter sharding "
                                            "(TRIAX_GRADIENTS_PARAMETERS_SHARDED)"));
  return choice;
}

void in_config_file(const std::string& origin, const std::function<void()>& call) {
  try {
    call();
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    if (origin.empty() || message.rfind(origin + ": ", 0) == 0) throw;
    throw ConfigError(origin + ": " + message);
  }
}

}  // namespace triax
