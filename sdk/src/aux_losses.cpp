#include "triax/aux_losses.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstddef>

#include "triax/engine.hpp"
#include "triax/error.hpp"
#include "triax/tensor_handle.hpp"

namespace triax {

at::Tensor AuxiliaryLosses::add(const StageOutput& output, double share) {
  at::Tensor objective;
  auto join = [&](const at::Tensor& loss) { objective = objective.defined() ? objective + loss * share : loss * share; };
  if (output.aux_loss.defined()) {
    join(output.aux_loss);
    unnamed_.push_back(output.aux_loss.detach());
  }
  for (const auto& [name, loss] : output.aux_losses) {
    if (!loss.defined()) continue;
    join(loss);
    named_[name].push_back(loss.detach().to(at::kFloat));
  }
  return objective;
}

void AuxiliaryLosses::finish(StepResult& result, int micro_batches) const {
  if (!unnamed_.empty()) result.aux_loss = at::stack(unnamed_).mean();
  for (const auto& [name, values] : named_) result.aux_losses[name] = at::stack(values).sum() / micro_batches;
}

namespace detail {

std::vector<std::string> aux_loss_names_of(const triax_model_ref& model) {
  const triax_model_vtable& vtable = *model.vtable;
  if (vtable.struct_size < offsetof(triax_model_vtable, aux_loss_names) + sizeof(vtable.aux_loss_names) ||
      vtable.aux_loss_names == nullptr)
    return {};
  const char* names[TRIAX_MAX_AUX_LOSSES] = {};
  const int32_t count = std::clamp(vtable.aux_loss_names(model.model, names, TRIAX_MAX_AUX_LOSSES), 0,
                                   static_cast<int32_t>(TRIAX_MAX_AUX_LOSSES));
  std::vector<std::string> out;
  for (int32_t i = 0; i < count; ++i) out.emplace_back(names[i] != nullptr ? names[i] : "");
  return out;
}

std::map<std::string, at::Tensor> named_aux_losses(triax_tensor* const* handles, const std::vector<std::string>& names) {
  std::map<std::string, at::Tensor> out;
  for (size_t i = 0; i < TRIAX_MAX_AUX_LOSSES; ++i) {
    at::Tensor loss = adopt_handle(handles[i]);
    if (loss.defined() && i < names.size()) out[names[i]] = std::move(loss);
  }
  return out;
}

void aux_losses_to_c(const std::map<std::string, at::Tensor>& losses, const std::vector<std::string>& names,
                     triax_tensor** handles, const std::string& who) {
  for (const auto& [name, loss] : losses) {
    const auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) {
      std::string declared;
      for (const std::string& n : names) declared += (declared.empty() ? "" : ", ") + n;
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, who + ": auxiliary loss '" + name +
                                                    "' is not one of the model's aux_loss_names (" +
                                                    (declared.empty() ? "none declared" : declared) + ")");
    }
    handles[it - names.begin()] = release_handle(loss);
  }
}

}  // namespace detail
}  // namespace triax
