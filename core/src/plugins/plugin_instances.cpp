#include "triax/core/plugins/plugin_instances.hpp"

#include <algorithm>
#include <cstddef>

#include "triax/core/plugins/plugin_registry.hpp"
#include "triax/error.hpp"
#include "triax/tensor_handle.hpp"

namespace triax {

void throw_plugin_failure(triax_status status, const triax_error& error, const std::string& who) {
  std::string message = who + ": " + error.message;
  if (status == TRIAX_ERROR_INVALID_CONFIG) throw ConfigError(error.message);
  throw Error(status, message);
}

std::vector<double> ModelInstance::describe_blocks(const triax_model_vtable& vtable, const std::string& name,
                                                   const std::string& config_yaml, int64_t sequence_length) {
  triax_error error{};
  int32_t count = 0;
  triax_status status = vtable.describe_blocks(config_yaml.c_str(), sequence_length, nullptr, 0, &count, &error);
  if (status != TRIAX_OK) throw_plugin_failure(status, error, "model plugin '" + name + "'");
  std::vector<double> costs(static_cast<size_t>(count));
  status = vtable.describe_blocks(config_yaml.c_str(), sequence_length, costs.data(), count, &count, &error);
  if (status != TRIAX_OK) throw_plugin_failure(status, error, "model plugin '" + name + "'");
  return costs;
}

ModelInstance::ModelInstance(const triax_model_vtable& vtable, std::string name, const std::string& config_yaml,
                             const triax_model_context& context)
    : vtable_(vtable), name_(std::move(name)) {
  triax_error error{};
  triax_status status = vtable_.create(config_yaml.c_str(), &context, &handle_, &error);
  if (status != TRIAX_OK) throw_plugin_failure(status, error, "model plugin '" + name_ + "'");
  int64_t count = vtable_.parameter_count(handle_);
  parameters_.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    triax_parameter_info info{};
    info.struct_size = sizeof(info);
    status = vtable_.parameter_info(handle_, i, &info, &error);
    if (status != TRIAX_OK) throw_plugin_failure(status, error, "model plugin '" + name_ + "'");
    NamedParameter parameter;
    parameter.name = info.name;
    parameter.tensor = adopt_handle(info.tensor);
    parameter.spec.global_shape.assign(info.global_shape, info.global_shape + info.ndim);
    parameter.spec.shard_offset.assign(info.shard_offset, info.shard_offset + info.ndim);
    parameter.spec.flags = info.flags;
    if (info.tied_key != nullptr) parameter.spec.tied_key = info.tied_key;
    // A plugin before ABI 1.2 leaves unpadded_shape zero: no padding.
    if (info.struct_size >= offsetof(triax_parameter_info, unpadded_shape) + sizeof(info.unpadded_shape) &&
        std::any_of(info.unpadded_shape, info.unpadded_shape + info.ndim, [](int64_t d) { return d != 0; }))
      parameter.spec.unpadded_shape.assign(info.unpadded_shape, info.unpadded_shape + info.ndim);
    parameters_.push_back(std::move(parameter));
  }
}

ModelInstance::~ModelInstance() {
  parameters_.clear();
  if (handle_ != nullptr) vtable_.destroy(handle_);
}

double ModelInstance::flops_per_token(int64_t sequence_length) const {
  return vtable_.flops_per_token(handle_, sequence_length);
}

int64_t ModelInstance::total_parameters() const { return vtable_.total_parameters(handle_); }

std::string ModelInstance::resolved_config() const { return vtable_.resolved_config(handle_); }

void ModelInstance::set_training(bool training) {
  triax_error error{};
  triax_status status = vtable_.set_training(handle_, training ? 1 : 0, &error);
  if (status != TRIAX_OK) throw_plugin_failure(status, error, "model plugin '" + name_ + "'");
}

EngineInstance::EngineInstance(const triax_engine_vtable& vtable, std::string name, const triax_engine_context& context)
    : vtable_(vtable), name_(std::move(name)) {
  triax_error error{};
  triax_status status = vtable_.create(&context, &handle_, &error);
  if (status != TRIAX_OK) throw_plugin_failure(status, error, "engine plugin '" + name_ + "'");
}

EngineInstance::~EngineInstance() {
  if (handle_ != nullptr) vtable_.destroy(handle_);
}

EngineInstance::Result EngineInstance::train_step(const triax_step_request& request) {
  triax_step_result result{};
  result.struct_size = sizeof(result);
  triax_error error{};
  triax_status status = vtable_.train_step(handle_, &request, &result, &error);
  if (status != TRIAX_OK) throw_plugin_failure(status, error, "engine plugin '" + name_ + "'");
  return {adopt_handle(result.loss), adopt_handle(result.aux_loss), result.peak_live_micro_batches};
}

int EngineInstance::model_chunks() const {
  if (vtable_.struct_size < offsetof(triax_engine_vtable, model_chunks) + sizeof(vtable_.model_chunks) ||
      vtable_.model_chunks == nullptr)
    return 1;
  const int32_t chunks = vtable_.model_chunks(handle_);
  if (chunks < 1)
    throw Error("engine plugin '" + name_ + "': asked for " + std::to_string(chunks) +
                " model chunks per pipeline rank (at least 1)");
  return chunks;
}

OptimizerInstance::OptimizerInstance(const triax_optimizer_vtable& vtable, std::string name,
                                     const triax_optimizer_context& context,
                                     const std::vector<triax_optimizer_param>& params)
    : vtable_(vtable), name_(std::move(name)) {
  triax_error error{};
  triax_status status = vtable_.create(&context, params.data(), static_cast<int64_t>(params.size()), &handle_, &error);
  if (status != TRIAX_OK) throw_plugin_failure(status, error, "optimizer plugin '" + name_ + "'");
}

OptimizerInstance::~OptimizerInstance() {
  if (handle_ != nullptr) vtable_.destroy(handle_);
}

void OptimizerInstance::step(const std::vector<at::Tensor>& grads, double learning_rate) {
  std::vector<triax_tensor*> handles;
  handles.reserve(grads.size());
  for (const auto& grad : grads) handles.push_back(borrow_handle(grad));
  triax_error error{};
  triax_status status =
      vtable_.step(handle_, handles.data(), static_cast<int64_t>(handles.size()), learning_rate, &error);
  if (status != TRIAX_OK) throw_plugin_failure(status, error, "optimizer plugin '" + name_ + "'");
}

int64_t OptimizerInstance::state_bytes() const { return vtable_.state_bytes(handle_); }

bool OptimizerInstance::exposes_state() const {
  return vtable_.struct_size >= offsetof(triax_optimizer_vtable, state_loaded) + sizeof(vtable_.state_loaded) &&
         vtable_.state_count != nullptr && vtable_.state_entry != nullptr && vtable_.state_loaded != nullptr;
}

std::vector<OptimizerStateTensor> OptimizerInstance::state() const {
  std::vector<OptimizerStateTensor> out;
  if (!exposes_state()) return out;
  const int64_t count = vtable_.state_count(handle_);
  if (count < 0) throw Error("optimizer plugin '" + name_ + "': could not list its state");
  out.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    triax_optimizer_state entry{};
    entry.struct_size = sizeof(entry);
    triax_error error{};
    triax_status status = vtable_.state_entry(handle_, i, &entry, &error);
    if (status != TRIAX_OK) throw_plugin_failure(status, error, "optimizer plugin '" + name_ + "'");
    OptimizerStateTensor state;
    state.param_index = entry.param_index;
    state.name = entry.name != nullptr ? entry.name : "";
    state.tensor = adopt_handle(entry.tensor);
    state.element_offset = entry.element_offset;
    state.per_parameter = entry.kind == TRIAX_STATE_PER_PARAMETER;
    out.push_back(std::move(state));
  }
  return out;
}

void OptimizerInstance::state_loaded() {
  if (!exposes_state()) return;
  triax_error error{};
  triax_status status = vtable_.state_loaded(handle_, &error);
  if (status != TRIAX_OK) throw_plugin_failure(status, error, "optimizer plugin '" + name_ + "'");
}

triax_gradient_sharding OptimizerInstance::gradient_sharding() const {
  return static_cast<triax_gradient_sharding>(optimizer_gradient_sharding(vtable_));
}

}  // namespace triax
