#include "triax/comm/comm_settings.hpp"

#include "triax/config/train_config.hpp"

namespace triax {

CommSettings comm_settings(const TrainConfig& config) {
  const ParallelismConfig& p = config.parallelism;
  CommSettings settings;
  settings.backend = p.comm_backend;
  settings.device = config.general.device;
  settings.shape.dp = static_cast<int>(p.dp);
  settings.shape.pp = static_cast<int>(p.pp);
  settings.shape.tp = static_cast<int>(p.tp);
  settings.shape.ep = static_cast<int>(p.expert_parallel_size);
  settings.shape.cp = static_cast<int>(p.context_parallel_size);
  settings.timeout_seconds = p.comm_timeout_seconds;
  return settings;
}

}  // namespace triax
