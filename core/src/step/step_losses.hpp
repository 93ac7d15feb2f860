// One step's losses as every rank logs them: the LM loss and the auxiliary losses by name, each
// summed over the pipeline stages (a stage adds what its blocks compute) and averaged over the
// data-parallel replicas (and the context-parallel ranks), all in one collective per group.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <string>
#include <utility>
#include <vector>

#include "triax/core/plugins/plugin_instances.hpp"

namespace triax {

class Communicator;

class StepLosses {
 public:
  // `aux_names`: the model's aux_loss_names. A model that returns the unnamed aux_loss of ABI
  // 1.0-1.2 has it logged as "aux_loss".
  explicit StepLosses(std::vector<std::string> aux_names) : aux_names_(std::move(aux_names)) {}

  // [loss, each named aux loss, the unnamed aux loss, whether some rank had one], reduced; not
  // read back. Collective over pp and dp.
  at::Tensor reduce(const EngineInstance::Result& result, Communicator& communicator,
                    const c10::Device& device) const;
  // From reduce()'s values, on the host: the LM loss, and the auxiliary losses by name.
  static double loss(const at::Tensor& values) { return values[0].item<double>(); }
  std::vector<std::pair<std::string, double>> aux_losses(const at::Tensor& values) const;

 private:
  std::vector<std::string> aux_names_;
};

}  // namespace triax
