#include "triax/core/plugins/plugin_instances.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "triax/aux_losses.hpp"
#include "triax/core/comm/parallel_context.hpp"
#include "triax/core/plugins/plugin_registry.hpp"
#include "triax/error.hpp"
#include "triax/optimizer.hpp"
#include "triax/tensor_handle.hpp"

namespace triax {

void throw_plugin_failure(triax_status status, const triax_error& error, const std::string& who) {
  std::string message = who + ": " + error.message;
  if (status == TRIAX_ERROR_INVALID_CONFIG) throw ConfigError(error.message);
  throw Error(status, message);
}

namespace {

// Whether model.init_method asks for spectral muP: use_mup present and not false.
bool asks_for_mup(const char* init_method_yaml) {
  if (init_method_yaml == nullptr) return false;
  const YAML::Node init_method = YAML::Load(init_method_yaml);
  if (!init_method.IsMap()) return false;
  const YAML::Node use_mup = init_method["use_mup"];
  if (!use_mup.IsDefined() || use_mup.IsNull()) return false;
  bool value = true;
  return !(YAML::convert<bool>::decode(use_mup, value) && !value);
}

}  // namespace

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

int64_t ModelInstance::vocab_size(const triax_model_vtable& vtable, const std::string& name,
                                  const std::string& config_yaml) {
  if (auto plugin_vocab_size = model_plugin_extras(vtable).vocab_size) {
    int64_t out = 0;
    triax_error error{};
    const triax_status status = plugin_vocab_size(config_yaml.c_str(), &out, &error);
    if (status != TRIAX_OK) throw_plugin_failure(status, error, "model plugin '" + name + "'");
    if (out <= 0) throw Error("model plugin '" + name + "' gives a vocabulary of " + std::to_string(out) + " tokens");
    return out;
  }
  const YAML::Node vocab = YAML::Load(config_yaml)["vocab_size"];
  if (!vocab.IsDefined() || !vocab.IsScalar())
    throw ConfigError("model.model_config.vocab_size: required by the data loader (model plugin '" + name +
                      "' does not give its vocabulary size)");
  return vocab.as<int64_t>();
}

std::string ModelInstance::flops_formula(const triax_model_vtable& vtable) {
  const char* formula = model_plugin_extras(vtable).flops_formula;
  return formula != nullptr ? formula : "the model plugin's training count";
}

namespace {

// Refuses a context that asks the model for what its table does not declare.
void refuse_undeclared_capabilities(const triax_model_vtable& vtable, const std::string& name,
                                    const triax_model_context& context) {
  if (asks_for_mup(context.init_method_yaml) &&
      (model_plugin_extras(vtable).capabilities & TRIAX_MODEL_SPECTRAL_MUP) == 0)
    throw PluginError("model.init_method.use_mup: model plugin '" + name +
                      "' does not support spectral muP (its table declares no TRIAX_MODEL_SPECTRAL_MUP, ABI 1.5); "
                      "leave use_mup out to initialise it its own way");
  if (context.recompute_mlp_activation != 0 &&
      (model_plugin_extras(vtable).capabilities & TRIAX_MODEL_RECOMPUTE_MLP_ACTIVATION) == 0)
    throw PluginError("parallelism.recompute_mlp_activation: model plugin '" + name +
                      "' does not support it (its table declares no TRIAX_MODEL_RECOMPUTE_MLP_ACTIVATION, ABI 1.7); "
                      "set it to false, or use parallelism.recompute_layer");
}

// Whether a plugin's parameter info is recent enough to hold the member that ends at `end`.
bool info_covers(const triax_parameter_info& info, size_t end) { return info.struct_size >= end; }

// The group the parameter's gradients are averaged over: dp before ABI 1.3 or when 0, and the cp
// ranks too, which hold the same parameters.
triax_group gradient_group_of(const triax_parameter_info& info, const std::string& plugin, const std::string& name,
                              int cp_size) {
  triax_group group = TRIAX_GROUP_DP;
  if (info_covers(info, offsetof(triax_parameter_info, gradient_group) + sizeof(info.gradient_group)) &&
      info.gradient_group != 0) {
    if (info.gradient_group != TRIAX_GROUP_DP && info.gradient_group != TRIAX_GROUP_EDP)
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "model plugin '" + plugin + "': parameter " + name +
                                                    " declares gradient group " + std::to_string(info.gradient_group) +
                                                    ", neither dp nor edp");
    group = static_cast<triax_group>(info.gradient_group);
  }
  return with_context_parallel(group, cp_size);
}

// The parameter's learning-rate scale: 1 (the step's rate) before ABI 1.5.
double lr_scale_of(const triax_parameter_info& info, const std::string& plugin, const std::string& name) {
  if (!info_covers(info, offsetof(triax_parameter_info, lr_scale) + sizeof(info.lr_scale))) return 1.0;
  if (!(info.lr_scale > 0.0) || !std::isfinite(info.lr_scale))
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "model plugin '" + plugin + "': parameter " + name +
                                                  " declares learning-rate scale " + std::to_string(info.lr_scale) +
                                                  ", not a positive finite number");
  return info.lr_scale;
}

// optimizer.zero_stage 3: the model must keep every parameter as its ZeRO-3 shard, and only then.
void check_zero3_shard(const NamedParameter& parameter, const std::string& plugin, const triax_model_context& context) {
  const bool zero3_stage =
      context.struct_size >= offsetof(triax_model_context, zero_stage) + sizeof(context.zero_stage) &&
      context.zero_stage == 3;
  if (zero3_stage != ((parameter.spec.flags & TRIAX_PARAM_ZERO3_SHARD) != 0))
    throw PluginError("optimizer.zero_stage: model plugin '" + plugin + "' " +
                      (zero3_stage ? "keeps parameter " + parameter.name +
                                         " whole at zero_stage 3 (it does not shard its parameters for ZeRO-3)"
                                   : "hands parameter " + parameter.name + " over as a ZeRO-3 shard at zero_stage " +
                                         std::to_string(context.zero_stage)));
}

NamedParameter parameter_of(const triax_parameter_info& info, const std::string& plugin,
                            const triax_model_context& context) {
  NamedParameter parameter;
  parameter.name = info.name;
  parameter.tensor = adopt_handle(info.tensor);
  parameter.spec.global_shape.assign(info.global_shape, info.global_shape + info.ndim);
  parameter.spec.shard_offset.assign(info.shard_offset, info.shard_offset + info.ndim);
  parameter.spec.flags = info.flags;
  if (info.tied_key != nullptr) parameter.spec.tied_key = info.tied_key;
  // A plugin before ABI 1.2 leaves unpadded_shape zero: no padding.
  if (info_covers(info, offsetof(triax_parameter_info, unpadded_shape) + sizeof(info.unpadded_shape)) &&
      std::any_of(info.unpadded_shape, info.unpadded_shape + info.ndim, [](int64_t d) { return d != 0; }))
    parameter.spec.unpadded_shape.assign(info.unpadded_shape, info.unpadded_shape + info.ndim);
  parameter.spec.gradient_group = gradient_group_of(info, plugin, parameter.name, context.cp_size);
  parameter.spec.lr_scale = lr_scale_of(info, plugin, parameter.name);
  check_zero3_shard(parameter, plugin, context);
  return parameter;
}

}  // namespace

ModelInstance::ModelInstance(const triax_model_vtable& vtable, std::string name, const std::string& config_yaml,
                             const triax_model_context& context)
    : vtable_(vtable), name_(std::move(name)) {
  refuse_undeclared_capabilities(vtable_, name_, context);
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
    parameters_.push_back(parameter_of(info, name_, context));
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

std::vector<std::string> ModelInstance::aux_loss_names() const { return detail::aux_loss_names_of(ref()); }

void ModelInstance::set_training(bool training) {
  triax_error error{};
  triax_status status = vtable_.set_training(handle_, training ? 1 : 0, &error);
  if (status != TRIAX_OK) throw_plugin_failure(status, error, "model plugin '" + name_ + "'");
}

void ModelInstance::track_attention_logits(bool enable) {
  if (vtable_.struct_size < offsetof(triax_model_vtable, track_attention_logits) + sizeof(vtable_.track_attention_logits) ||
      vtable_.track_attention_logits == nullptr)
    throw Error(TRIAX_ERROR_UNSUPPORTED, "model plugin '" + name_ + "' does not report its attention logits (ABI 1.12)");
  triax_error error{};
  triax_status status = vtable_.track_attention_logits(handle_, enable ? 1 : 0, &error);
  if (status != TRIAX_OK) throw_plugin_failure(status, error, "model plugin '" + name_ + "'");
}

std::vector<std::pair<int64_t, at::Tensor>> ModelInstance::qk_clip_factors(double threshold) {
  const auto capacity = static_cast<int32_t>(parameters_.size());
  std::vector<int64_t> indices(parameters_.size());
  std::vector<triax_tensor*> factors(parameters_.size(), nullptr);
  int32_t count = 0;
  triax_error error{};
  triax_status status =
      vtable_.qk_clip_factors(handle_, threshold, indices.data(), factors.data(), capacity, &count, &error);
  if (status != TRIAX_OK) throw_plugin_failure(status, error, "model plugin '" + name_ + "'");
  std::vector<std::pair<int64_t, at::Tensor>> out;
  for (int32_t k = 0; k < count; ++k) {
    at::Tensor factor = adopt_handle(factors[static_cast<size_t>(k)]);
    const int64_t index = indices[static_cast<size_t>(k)];
    if (index < 0 || index >= capacity)
      throw Error("model plugin '" + name_ + "': a QK-clip factor for parameter " + std::to_string(index) + " of " +
                  std::to_string(capacity));
    out.emplace_back(index, std::move(factor));
  }
  return out;
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
  Result out{adopt_handle(result.loss), adopt_handle(result.aux_loss), result.peak_live_micro_batches, {}};
  if (result.struct_size >= offsetof(triax_step_result, aux_losses) + sizeof(result.aux_losses))
    for (triax_tensor* handle : result.aux_losses) out.aux_losses.push_back(adopt_handle(handle));
  return out;
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

triax_chunk_placement EngineInstance::chunk_placement() const {
  if (vtable_.struct_size < offsetof(triax_engine_vtable, chunk_placement) + sizeof(vtable_.chunk_placement) ||
      vtable_.chunk_placement == nullptr)
    return TRIAX_CHUNKS_INTERLEAVED;
  const int32_t placement = vtable_.chunk_placement(handle_);
  if (placement != TRIAX_CHUNKS_INTERLEAVED && placement != TRIAX_CHUNKS_V)
    throw Error("engine plugin '" + name_ + "': places its model chunks in an unknown way (" +
                std::to_string(placement) + ")");
  return static_cast<triax_chunk_placement>(placement);
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

bool OptimizerInstance::takes_scaled_gradients() const {
  return vtable_.struct_size >= offsetof(triax_optimizer_vtable, step_scaled) + sizeof(vtable_.step_scaled) &&
         vtable_.step_scaled != nullptr;
}

void OptimizerInstance::step(const std::vector<at::Tensor>& grads, double learning_rate,
                             const at::Tensor& grad_scale) {
  const bool scaled_by_plugin = takes_scaled_gradients();
  // An older plugin's: fp32, clipped here.
  const std::vector<at::Tensor> handed = scaled_by_plugin ? grads : clipped_full_precision(grads, grad_scale);
  std::vector<triax_tensor*> handles;
  handles.reserve(grads.size());
  for (const auto& grad : handed) handles.push_back(borrow_handle(grad));
  triax_error error{};
  const auto count = static_cast<int64_t>(handles.size());
  triax_status status =
      scaled_by_plugin
          ? vtable_.step_scaled(handle_, handles.data(), count, learning_rate,
                                grad_scale.defined() ? borrow_handle(grad_scale) : nullptr, &error)
          : vtable_.step(handle_, handles.data(), count, learning_rate, &error);
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

std::optional<std::string> OptimizerInstance::resolved_config() const {
  if (vtable_.struct_size < offsetof(triax_optimizer_vtable, resolved_config) + sizeof(vtable_.resolved_config) ||
      vtable_.resolved_config == nullptr)
    return std::nullopt;
  const char* text = vtable_.resolved_config(handle_);
  if (text == nullptr || *text == '\0') return std::nullopt;
  return std::string(text);
}

double OptimizerInstance::qk_clip_threshold() const {
  if (vtable_.struct_size < offsetof(triax_optimizer_vtable, qk_clip_threshold) + sizeof(vtable_.qk_clip_threshold) ||
      vtable_.qk_clip_threshold == nullptr)
    return 0.0;
  return vtable_.qk_clip_threshold(handle_);
}

void OptimizerInstance::scale_parameters(const std::vector<std::pair<int64_t, at::Tensor>>& factors) {
  if (vtable_.struct_size < offsetof(triax_optimizer_vtable, scale_parameters) + sizeof(vtable_.scale_parameters) ||
      vtable_.scale_parameters == nullptr)
    throw Error(TRIAX_ERROR_UNSUPPORTED, "optimizer plugin '" + name_ + "' cannot scale its parameters (ABI 1.12)");
  std::vector<int64_t> indices;
  std::vector<triax_tensor*> handles;
  for (const auto& [index, factor] : factors) {
    indices.push_back(index);
    handles.push_back(borrow_handle(factor));
  }
  triax_error error{};
  triax_status status = vtable_.scale_parameters(handle_, indices.data(), handles.data(),
                                                 static_cast<int64_t>(indices.size()), &error);
  if (status != TRIAX_OK) throw_plugin_failure(status, error, "optimizer plugin '" + name_ + "'");
}

triax_gradient_sharding OptimizerInstance::gradient_sharding() const {
  return static_cast<triax_gradient_sharding>(optimizer_gradient_sharding(vtable_));
}

}  // namespace triax
