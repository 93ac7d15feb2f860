#include "triax/parameter.hpp"

#include <stdexcept>
#include <unordered_set>

namespace triax {

ParameterSpec ParameterSpec::replicated(const at::Tensor& tensor, uint32_t extra_flags, ParameterRole role) {
  ParameterSpec spec;
  spec.global_shape = tensor.sizes().vec();
  spec.shard_offset.assign(spec.global_shape.size(), 0);
  spec.flags = TRIAX_PARAM_TP_REPLICATED | extra_flags;
  spec.role = role;
  return spec;
}

ParameterSpec ParameterSpec::sharded(std::vector<int64_t> global_shape, int64_t dim, int64_t offset,
                                     uint32_t extra_flags, ParameterRole role) {
  ParameterSpec spec;
  spec.shard_offset.assign(global_shape.size(), 0);
  spec.shard_offset.at(static_cast<size_t>(dim)) = offset;
  spec.global_shape = std::move(global_shape);
  spec.flags = extra_flags;
  spec.role = role;
  return spec;
}

const ParameterSpec* SpecifiedModule::spec_of(const std::string& local_name) const {
  auto it = specs_.find(local_name);
  return it == specs_.end() ? nullptr : &it->second;
}

void SpecifiedModule::tie_parameter(const std::string& local_name, const std::string& tied_key) {
  auto it = specs_.find(local_name);
  if (it == specs_.end())
    throw std::invalid_argument("tie_parameter: no parameter '" + local_name + "' registered with a spec");
  it->second.flags |= TRIAX_PARAM_TIED;
  it->second.tied_key = tied_key;
}

void SpecifiedModule::mark_padding(const std::string& local_name, std::vector<int64_t> unpadded_shape) {
  auto it = specs_.find(local_name);
  if (it == specs_.end())
    throw std::invalid_argument("mark_padding: no parameter '" + local_name + "' registered with a spec");
  if (unpadded_shape.size() != it->second.global_shape.size())
    throw std::invalid_argument("mark_padding: '" + local_name + "' has " +
                                std::to_string(it->second.global_shape.size()) + " dimensions, the unpadded shape " +
                                std::to_string(unpadded_shape.size()));
  for (size_t d = 0; d < unpadded_shape.size(); ++d)
    if (unpadded_shape[d] < 0 || unpadded_shape[d] > it->second.global_shape[d])
      throw std::invalid_argument("mark_padding: the unpadded shape of '" + local_name +
                                  "' exceeds its global shape in dimension " + std::to_string(d));
  it->second.unpadded_shape = std::move(unpadded_shape);
}

void SpecifiedModule::mark_expert(const std::string& local_name) {
  auto it = specs_.find(local_name);
  if (it == specs_.end())
    throw std::invalid_argument("mark_expert: no parameter '" + local_name + "' registered with a spec");
  if (it->second.flags & TRIAX_PARAM_TIED)
    throw std::invalid_argument("mark_expert: '" + local_name + "' is tied across pipeline stages; experts are not");
  it->second.gradient_group = TRIAX_GROUP_EDP;
}

at::Tensor SpecifiedModule::register_parameter_with_spec(const std::string& local_name, at::Tensor tensor,
                                                         ParameterSpec spec) {
  specs_[local_name] = std::move(spec);
  return register_parameter(local_name, std::move(tensor));
}

std::vector<NamedParameter> collect_parameters(torch::nn::Module& root) {
  std::vector<NamedParameter> out;
  std::unordered_set<const c10::TensorImpl*> seen;
  for (const auto& item : root.named_modules(/*name_prefix=*/"", /*include_self=*/true)) {
    const auto* specified = dynamic_cast<const SpecifiedModule*>(item.value().get());
    for (const auto& param : item.value()->named_parameters(/*recurse=*/false)) {
      if (!seen.insert(param.value().unsafeGetTensorImpl()).second) continue;
      std::string name = item.key().empty() ? param.key() : item.key() + "." + param.key();
      const ParameterSpec* spec = specified != nullptr ? specified->spec_of(param.key()) : nullptr;
      out.push_back({name, param.value(), spec != nullptr ? *spec : ParameterSpec::replicated(param.value())});
    }
  }
  return out;
}

}  // namespace triax
