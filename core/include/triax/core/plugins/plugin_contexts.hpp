// The contexts the core hands to plugins through the ABI, filled from the config in one place for
// training, `triax train --check` and generation. The C structs point into the YAML texts this
// object holds: keep it alive while a plugin reads them (until create() returns).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "triax/abi.h"
#include "triax/config/train_config.hpp"

namespace triax {

class Communicator;
class HostServices;

// This rank's place in every group a model may use (tp, pp, dp, ep, edp). Generation and the
// training contexts below fill the rest.
triax_model_context mesh_model_context(const Communicator& communicator);

// Where a rank sits for the engine (pipeline) and the optimizer (data parallel).
struct RankPlace {
  int32_t pp_rank = 0, pp_size = 1;
  int32_t dp_rank = 0, dp_size = 1;

  static RankPlace of(const Communicator& communicator);
  // Pipeline rank 0 and data rank 0 of the config's mesh, for checks made before any launch.
  static RankPlace first_of(const TrainConfig& config);
};

class PluginContexts {
 public:
  PluginContexts(const TrainConfig& config, RankPlace place, const HostServices& host);

  // model.model_config as the model plugin reads it (every value on its line of the file).
  const std::string& model_yaml() const { return model_yaml_; }
  // model.init_method.path: weights the host loads after the model initialised itself.
  const std::optional<std::string>& init_path() const { return init_path_; }

  triax_engine_context engine() const;
  // `device_name` is kept by the caller while the plugin reads the context.
  triax_model_context model(const Communicator& communicator, const std::string& device_name) const;
  // Per parameter: the group its gradient is averaged over, its learning-rate scale and its layout
  // in the whole parameter (kept by the caller, as above; empty: none given).
  triax_optimizer_context optimizer(const std::vector<int32_t>& gradient_groups, const std::vector<double>& lr_scales,
                                    const std::vector<triax_parameter_layout>& layouts = {}) const;

 private:
  const TrainConfig& config_;
  RankPlace place_;
  const triax_host* host_;
  bool sends_buffered_;  // the communicator's sends complete in the background
  std::string model_yaml_, init_method_yaml_, parallelism_yaml_, optimizer_yaml_;
  std::optional<std::string> init_path_;
};

}  // namespace triax
