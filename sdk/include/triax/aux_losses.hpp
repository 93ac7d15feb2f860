// Named auxiliary losses (ABI 1.3): a model declares their names (Model::aux_loss_names), each
// stage returns the ones it computes (StageOutput::aux_losses), the pipeline stage adds them to
// the objective for backward and reports their per-step means by name (StepResult::aux_losses).
// The single unnamed aux_loss of ABI 1.0-1.2 keeps working beside them.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

#include "triax/abi.h"
#include "triax/model.hpp"

namespace triax {

struct StepResult;

// One step's auxiliary losses on one pipeline rank, micro-batch by micro-batch.
class AuxiliaryLosses {
 public:
  // Records a micro-batch's auxiliary losses and returns what they add to its objective: their
  // sum times `share` (1 / micro-batches), or an undefined tensor when it has none.
  at::Tensor add(const StageOutput& output, double share);
  // Per name, the sum over recorded outputs divided by `micro_batches` (so losses of several
  // model chunks of one micro-batch add up); the unnamed aux_loss's mean likewise.
  void finish(StepResult& result, int micro_batches) const;

 private:
  std::map<std::string, std::vector<at::Tensor>> named_;
  std::vector<at::Tensor> unnamed_;
};

namespace detail {

// The names a model plugin declares (none before ABI 1.3).
std::vector<std::string> aux_loss_names_of(const triax_model_ref& model);
// handles[i] (new references, TRIAX_MAX_AUX_LOSSES of them) under names[i]; null ones are left out.
std::map<std::string, at::Tensor> named_aux_losses(triax_tensor* const* handles, const std::vector<std::string>& names);
// The reverse: each loss into the slot of its name (new references). Refuses a name the model
// does not declare, naming `who`.
void aux_losses_to_c(const std::map<std::string, at::Tensor>& losses, const std::vector<std::string>& names,
                     triax_tensor** handles, const std::string& who);

}  // namespace detail
}  // namespace triax
