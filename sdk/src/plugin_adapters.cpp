// The non-template halves of the SDK's C-ABI adapters (triax/plugin.hpp) and the C-to-C++
// conversions of contexts and requests.
#include <ATen/ops/_foreach_mul.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "triax/plugin.hpp"

namespace triax {
namespace {

c10::ScalarType parse_dtype(const std::string& name) {
  if (name == "float32") return c10::kFloat;
  if (name == "bfloat16") return c10::kBFloat16;
  if (name == "float16") return c10::kHalf;
  if (name == "float64") return c10::kDouble;
  throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "unknown dtype '" + name + "'");
}

}  // namespace

namespace detail {

void write_error(triax_error* error, const char* message) {
  if (error == nullptr) return;
  std::strncpy(error->message, message, TRIAX_ERROR_MESSAGE_CAPACITY - 1);
  error->message[TRIAX_ERROR_MESSAGE_CAPACITY - 1] = '\0';
}

void fill_parameter_info(const NamedParameter& parameter, triax_parameter_info* out) {
  if (parameter.spec.global_shape.size() > TRIAX_MAX_TENSOR_DIMS)
    throw Error("parameter " + parameter.name + " has more dimensions than the ABI carries");
  // Hosts before ABI 1.2 pass a zeroed struct of the 1.1 size.
  const size_t capacity = out->struct_size != 0 ? std::min(out->struct_size, sizeof(*out))
                                                 : offsetof(triax_parameter_info, unpadded_shape);
  std::memset(out, 0, capacity);
  out->struct_size = capacity;
  out->name = parameter.name.c_str();
  out->tensor = release_handle(parameter.tensor);
  out->ndim = static_cast<int32_t>(parameter.spec.global_shape.size());
  std::copy(parameter.spec.global_shape.begin(), parameter.spec.global_shape.end(), out->global_shape);
  std::copy(parameter.spec.shard_offset.begin(), parameter.spec.shard_offset.end(), out->shard_offset);
  out->flags = parameter.spec.flags;
  out->tied_key = parameter.spec.tied_key.empty() ? nullptr : parameter.spec.tied_key.c_str();
  if (capacity >= offsetof(triax_parameter_info, unpadded_shape) + sizeof(out->unpadded_shape))
    std::copy(parameter.spec.unpadded_shape.begin(), parameter.spec.unpadded_shape.end(), out->unpadded_shape);
  if (capacity >= offsetof(triax_parameter_info, gradient_group) + sizeof(out->gradient_group))
    out->gradient_group = parameter.spec.gradient_group;
  if (capacity >= offsetof(triax_parameter_info, lr_scale) + sizeof(out->lr_scale))
    out->lr_scale = parameter.spec.lr_scale;
}

namespace {
bool io_has_logits(const triax_stage_io& io) {
  return io.struct_size >= offsetof(triax_stage_io, logits) + sizeof(io.logits);
}
bool io_has_position_ids(const triax_stage_io& io) {
  return io.struct_size >= offsetof(triax_stage_io, position_ids) + sizeof(io.position_ids);
}
bool io_has_boundary_lists(const triax_stage_io& io) {
  return io.struct_size >= offsetof(triax_stage_io, boundary_out) + sizeof(io.boundary_out);
}
bool io_has_cuda_graph(const triax_stage_io& io) {  // ABI 1.9
  return io.struct_size >= offsetof(triax_stage_io, cuda_graph) + sizeof(io.cuda_graph);
}
bool io_has_weight_gradients(const triax_stage_io& io) {  // ABI 1.13
  return io.struct_size >= offsetof(triax_stage_io, weight_gradients) + sizeof(io.weight_gradients);
}
int32_t checked_boundary_count(int32_t count) {
  if (count < 0 || count > TRIAX_MAX_BOUNDARY_TENSORS)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "a stage boundary of " + std::to_string(count) + " tensors (at most " +
                                                  std::to_string(TRIAX_MAX_BOUNDARY_TENSORS) + ")");
  return count;
}
}  // namespace

StageInput stage_input_from_c(const triax_stage_io& io) {
  StageInput input;
  input.input_ids = view_handle(io.input_ids);
  input.label_ids = view_handle(io.label_ids);
  input.label_mask = view_handle(io.label_mask);
  input.hidden_in = view_handle(io.hidden_in);
  input.want_logits = io_has_logits(io) && io.want_logits != 0;
  if (io_has_boundary_lists(io))
    for (int32_t i = 0; i < checked_boundary_count(io.boundary_in_count); ++i)
      input.boundary_in.push_back(view_handle(io.boundary_in[i]));
  // Either spelling of the first tensor: hidden_in, or boundary_in[0].
  if (!input.boundary_in.empty() && !input.boundary_in.front().defined()) input.boundary_in.front() = input.hidden_in;
  if (!input.hidden_in.defined() && !input.boundary_in.empty()) input.hidden_in = input.boundary_in.front();
  input.cuda_graph = io_has_cuda_graph(io) && io.cuda_graph != 0;
  if (io_has_position_ids(io)) input.position_ids = view_handle(io.position_ids);
  if (io_has_weight_gradients(io)) input.weight_gradients = io.weight_gradients;
  return input;
}

void stage_output_to_c(StageOutput output, triax_stage_io* io) {
  std::vector<at::Tensor> boundary = output.boundary();
  if (boundary.size() > 1 && !io_has_boundary_lists(*io))
    throw Error(TRIAX_ERROR_UNSUPPORTED, "the model sends " + std::to_string(boundary.size()) +
                                             " tensors to the next stage; this host (before ABI 1.3) takes one");
  checked_boundary_count(static_cast<int32_t>(boundary.size()));
  // The first tensor goes out as hidden_out only (boundary_out[0] stays NULL), so that a host
  // reading either spelling adopts each reference once.
  io->hidden_out = boundary.empty() ? nullptr : release_handle(std::move(boundary.front()));
  if (io_has_boundary_lists(*io)) {
    io->boundary_out_count = static_cast<int32_t>(boundary.size());
    for (size_t i = 1; i < boundary.size(); ++i) io->boundary_out[i] = release_handle(std::move(boundary[i]));
  }
  io->loss = release_handle(std::move(output.loss));
  io->aux_loss = release_handle(std::move(output.aux_loss));
  if (io_has_logits(*io)) io->logits = release_handle(std::move(output.logits));
}

triax_cache* cache_to_c(std::unique_ptr<InferenceCache> cache) {
  if (!cache) throw Error("create_cache returned no cache");
  return reinterpret_cast<triax_cache*>(cache.release());
}

InferenceCache* cache_from_c(triax_cache* cache) { return reinterpret_cast<InferenceCache*>(cache); }

std::vector<InferenceCache*> caches_from_c(triax_cache* const* caches, int32_t count) {
  if (count < 1 || caches == nullptr)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "forward_cached needs one cache per row, got " + std::to_string(count));
  std::vector<InferenceCache*> out;
  out.reserve(static_cast<size_t>(count));
  for (int32_t i = 0; i < count; ++i) {
    if (caches[i] == nullptr)
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "forward_cached: the cache of row " + std::to_string(i) + " is null");
    out.push_back(cache_from_c(caches[i]));
  }
  return out;
}

void stage_aux_losses_to_c(StageOutput& output, const std::vector<std::string>& names, triax_stage_io* io) {
  if (output.aux_losses.empty()) return;
  if (io->struct_size >= offsetof(triax_stage_io, aux_losses) + sizeof(io->aux_losses)) {
    aux_losses_to_c(output.aux_losses, names, io->aux_losses, "model forward");
  } else {
    for (const auto& [name, loss] : output.aux_losses)
      output.aux_loss = output.aux_loss.defined() ? output.aux_loss + loss : loss;
  }
  output.aux_losses.clear();
}

void step_aux_losses_to_c(StepResult& result, const triax_step_request& request, triax_step_result* out) {
  if (result.aux_losses.empty() ||
      out->struct_size < offsetof(triax_step_result, aux_losses) + sizeof(out->aux_losses))
    return;
  aux_losses_to_c(result.aux_losses, aux_loss_names_of(request.model), out->aux_losses, "engine step result");
}

void fill_optimizer_state(const OptimizerState& state, triax_optimizer_state* out) {
  const size_t capacity = std::min(out->struct_size, sizeof(*out));
  if (capacity < sizeof(*out)) throw Error("the host's triax_optimizer_state is smaller than ABI 1.2's");
  out->param_index = state.param_index;
  out->name = state.name.c_str();
  out->tensor = release_handle(state.tensor);
  out->element_offset = state.element_offset;
  out->kind = state.per_parameter ? TRIAX_STATE_PER_PARAMETER : TRIAX_STATE_ELEMENTWISE;
}

void step_result_to_c(StepResult result, triax_step_result* out) {
  out->struct_size = sizeof(*out);
  out->loss = release_handle(std::move(result.loss));
  out->aux_loss = release_handle(std::move(result.aux_loss));
  out->peak_live_micro_batches = result.peak_live_micro_batches;
}

std::vector<OptimizerParam> optimizer_params_from_c(const triax_optimizer_param* params, int64_t count) {
  std::vector<OptimizerParam> out;
  out.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    OptimizerParam param;
    param.name = params[i].name;
    param.param = view_handle(params[i].param);
    param.weight_decay = params[i].weight_decay;
    param.flags = params[i].flags;
    out.push_back(std::move(param));
  }
  return out;
}

void qk_clip_factors_to_c(const std::vector<std::pair<int64_t, at::Tensor>>& factors, int64_t* indices,
                          triax_tensor** out, int32_t capacity, int32_t* count) {
  if (static_cast<int64_t>(factors.size()) > capacity)
    throw Error("the model has QK-clip factors for " + std::to_string(factors.size()) + " parameters; the host takes " +
                std::to_string(capacity));
  for (size_t k = 0; k < factors.size(); ++k) {
    indices[k] = factors[k].first;
    out[k] = release_handle(factors[k].second);
  }
  *count = static_cast<int32_t>(factors.size());
}

std::vector<std::pair<int64_t, at::Tensor>> parameter_factors_from_c(const int64_t* indices,
                                                                      triax_tensor* const* factors, int64_t count) {
  std::vector<std::pair<int64_t, at::Tensor>> out;
  for (int64_t k = 0; k < count; ++k) out.emplace_back(indices[k], view_handle(factors[k]));
  return out;
}

void apply_gradient_groups(const triax_optimizer_context& context, std::vector<OptimizerParam>& params) {
  if (context.struct_size < offsetof(triax_optimizer_context, gradient_groups) + sizeof(context.gradient_groups) ||
      context.gradient_groups == nullptr)
    return;  // a host before ABI 1.3: every gradient is averaged over dp
  for (size_t i = 0; i < params.size(); ++i) {
    const int32_t group = context.gradient_groups[i];
    // With context parallelism (ABI 1.10) the host widens dp and edp by the cp ranks.
    if (group != TRIAX_GROUP_DP && group != TRIAX_GROUP_EDP && group != TRIAX_GROUP_DP_CP &&
        group != TRIAX_GROUP_EDP_CP)
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "parameter '" + params[i].name + "': gradient group " +
                                                    std::to_string(group) + " is none of dp, edp, dp_cp, edp_cp");
    params[i].gradient_group = static_cast<triax_group>(group);
  }
}

void apply_lr_scales(const triax_optimizer_context& context, std::vector<OptimizerParam>& params) {
  if (context.struct_size < offsetof(triax_optimizer_context, lr_scales) + sizeof(context.lr_scales) ||
      context.lr_scales == nullptr)
    return;  // a host before ABI 1.5, or no scales: the step's learning rate for every parameter
  for (size_t i = 0; i < params.size(); ++i) {
    const double scale = context.lr_scales[i];
    if (!(scale > 0.0) || !std::isfinite(scale))
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "parameter '" + params[i].name + "': learning-rate scale " +
                                                    std::to_string(scale) + " is not a positive finite number");
    params[i].lr_scale = scale;
  }
}

void apply_layouts(const triax_optimizer_context& context, std::vector<OptimizerParam>& params) {
  if (context.struct_size < offsetof(triax_optimizer_context, layouts) + sizeof(context.layouts) ||
      context.layouts == nullptr)
    return;  // a host before ABI 1.12: every tensor is taken as whole
  for (size_t i = 0; i < params.size(); ++i) {
    const triax_parameter_layout& layout = context.layouts[i];
    if (layout.ndim < 0 || layout.ndim > TRIAX_MAX_TENSOR_DIMS)
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "parameter '" + params[i].name + "': layout of " +
                                                    std::to_string(layout.ndim) + " dimensions");
    params[i].global_shape.assign(layout.global_shape, layout.global_shape + layout.ndim);
    params[i].shard_offset.assign(layout.shard_offset, layout.shard_offset + layout.ndim);
  }
}

}  // namespace detail

ModelContext ModelContext::from_c(const triax_model_context& c) {
  ModelContext context;
  context.tp_rank = c.tp_rank;
  context.tp_size = c.tp_size;
  context.pp_rank = c.pp_rank;
  context.pp_size = c.pp_size;
  context.dp_rank = c.dp_rank;
  context.dp_size = c.dp_size;
  context.first_block = c.first_block;
  context.last_block = c.last_block;
  context.device = c10::Device(std::string(c.device != nullptr ? c.device : "cpu"));
  context.dtype = parse_dtype(c.dtype != nullptr ? c.dtype : "float32");
  context.seed = c.seed;
  context.init_method = c.init_method_yaml != nullptr ? YAML::Load(c.init_method_yaml) : YAML::Node();
  context.tp_mode = c.tp_mode == 1 ? TpMode::ReduceScatter : TpMode::AllReduce;
  context.make_vocab_size_divisible_by = std::max<int64_t>(1, c.make_vocab_size_divisible_by);
  context.host = Host(c.host);
  if (c.struct_size >= offsetof(triax_model_context, recompute_layer) + sizeof(c.recompute_layer))
    context.recompute_layer = c.recompute_layer != 0;
  if (c.struct_size >= offsetof(triax_model_context, recompute_layer_count) + sizeof(c.recompute_layer_count))
    context.recompute_layer_count = c.recompute_layer_count;
  if (c.struct_size >= offsetof(triax_model_context, tp_linear_async_communication) +
                           sizeof(c.tp_linear_async_communication))
    context.tp_linear_async_communication = c.tp_linear_async_communication != 0;
  if (c.struct_size >= offsetof(triax_model_context, recompute_mlp_activation) + sizeof(c.recompute_mlp_activation))
    context.recompute_mlp_activation = c.recompute_mlp_activation != 0;
  if (c.struct_size >= offsetof(triax_model_context, zero_stage) + sizeof(c.zero_stage))
    context.zero_stage = c.zero_stage;
  if (c.struct_size >= offsetof(triax_model_context, cp_ring_attention) + sizeof(c.cp_ring_attention))
    context.cp_ring_attention = c.cp_ring_attention != 0;
  if (c.struct_size >= offsetof(triax_model_context, recompute_moe_layers) + sizeof(c.recompute_moe_layers))
    context.recompute_moe_layers = c.recompute_moe_layers != 0;
  if (c.struct_size >= offsetof(triax_model_context, edp_size) + sizeof(c.edp_size) && c.ep_size > 0 &&
      c.edp_size > 0) {
    context.ep_rank = c.ep_rank;
    context.ep_size = c.ep_size;
    context.edp_rank = c.edp_rank;
    context.edp_size = c.edp_size;
  } else {  // an older host knows no expert parallelism: every dp rank is its own edp group
    context.edp_rank = context.dp_rank;
    context.edp_size = context.dp_size;
  }
  if (c.struct_size >= offsetof(triax_model_context, fp8_yaml) + sizeof(c.fp8_yaml) && c.fp8_yaml != nullptr)
    context.fp8 = std::make_shared<const Fp8Options>(Fp8Options::from_yaml(c.fp8_yaml));
  // A host before 1.3 gives one chunk: virtual stages are pipeline ranks.
  context.virtual_stage = context.pp_rank;
  context.virtual_stage_count = context.pp_size;
  if (c.struct_size >= offsetof(triax_model_context, virtual_stage_count) + sizeof(c.virtual_stage_count) &&
      c.chunk_count >= 1) {
    context.chunk_index = c.chunk_index;
    context.chunk_count = c.chunk_count;
    context.virtual_stage = c.virtual_stage;
    context.virtual_stage_count = c.virtual_stage_count;
  }
  return context;
}

std::vector<at::Tensor> clipped_full_precision(const std::vector<at::Tensor>& grads, const at::Tensor& grad_scale) {
  std::vector<at::Tensor> full;
  full.reserve(grads.size());
  for (const at::Tensor& grad : grads) {
    const bool full_precision = grad.scalar_type() == at::kFloat || grad.scalar_type() == at::kDouble;
    full.push_back(full_precision ? grad : grad.to(at::kFloat));  // exact: fp32 holds every bf16/fp16 value
  }
  if (grad_scale.defined() && !full.empty()) at::_foreach_mul_(full, grad_scale);
  return full;
}

void Optimizer::step_scaled(const std::vector<at::Tensor>& grads, double learning_rate, const at::Tensor& grad_scale) {
  step(clipped_full_precision(grads, grad_scale), learning_rate);
}

const std::vector<OptimizerState>& Optimizer::state_table() {
  if (!state_table_ready_) {
    state_table_ = state();
    state_table_ready_ = true;
  }
  return state_table_;
}

void Optimizer::scale_parameters(const std::vector<std::pair<int64_t, at::Tensor>>&) {
  throw Error(TRIAX_ERROR_UNSUPPORTED, "this optimizer cannot scale its parameters (QK-clip)");
}

const std::string& Optimizer::resolved_config_text() {
  if (!resolved_config_ready_) {
    resolved_config_text_ = resolved_config();
    resolved_config_ready_ = true;
  }
  return resolved_config_text_;
}

const std::vector<std::string>& Model::aux_loss_name_table() {
  if (!aux_names_ready_) {
    aux_names_ = aux_loss_names();
    if (aux_names_.size() > TRIAX_MAX_AUX_LOSSES)
      throw Error("the model declares " + std::to_string(aux_names_.size()) + " auxiliary losses; the ABI carries " +
                  std::to_string(TRIAX_MAX_AUX_LOSSES));
    aux_names_ready_ = true;
  }
  return aux_names_;
}

std::vector<at::Tensor> StageInput::boundary() const {
  if (boundary_in.empty()) return hidden_in.defined() ? std::vector<at::Tensor>{hidden_in} : std::vector<at::Tensor>{};
  std::vector<at::Tensor> tensors = boundary_in;
  if (!tensors.front().defined()) tensors.front() = hidden_in;
  return tensors;
}

std::vector<at::Tensor> StageOutput::boundary() const {
  if (boundary_out.empty())
    return hidden_out.defined() ? std::vector<at::Tensor>{hidden_out} : std::vector<at::Tensor>{};
  std::vector<at::Tensor> tensors = boundary_out;
  if (!tensors.front().defined()) tensors.front() = hidden_out;
  if (hidden_out.defined() && !tensors.front().is_same(hidden_out))
    throw Error("a stage output whose hidden_out is not boundary_out[0]");
  for (size_t i = 0; i < tensors.size(); ++i)
    if (!tensors[i].defined()) throw Error("boundary_out[" + std::to_string(i) + "] is undefined");
  return tensors;
}

std::vector<NamedParameter>& Model::parameter_table() {
  if (!table_ready_) {
    table_ = collect_parameters(*this);
    table_ready_ = true;
  }
  return table_;
}

std::unique_ptr<InferenceCache> Model::create_cache(int64_t) {
  throw Error(TRIAX_ERROR_UNSUPPORTED, "this model has no inference cache (create_cache is not implemented)");
}

StageOutput Model::forward_cached(const std::vector<InferenceCache*>&, const StageInput&) {
  throw Error(TRIAX_ERROR_UNSUPPORTED, "this model has no inference cache (forward_cached is not implemented)");
}

EngineContext EngineContext::from_c(const triax_engine_context& c) {
  EngineContext context;
  context.pp_rank = c.pp_rank;
  context.pp_size = c.pp_size;
  context.parallelism = c.parallelism_yaml != nullptr ? YAML::Load(c.parallelism_yaml) : YAML::Node();
  context.host = Host(c.host);
  if (c.struct_size >= offsetof(triax_engine_context, micro_batches) + sizeof(c.micro_batches))
    context.micro_batches = c.micro_batches;
  if (c.struct_size >= offsetof(triax_engine_context, places_chunks) + sizeof(c.places_chunks))
    context.host_places_chunks = c.places_chunks != 0;
  if (c.struct_size >= offsetof(triax_engine_context, sends_buffered) + sizeof(c.sends_buffered))
    context.host_buffers_sends = c.sends_buffered != 0;
  return context;
}

OptimizerContext OptimizerContext::from_c(const triax_optimizer_context& c) {
  OptimizerContext context;
  context.dp_rank = c.dp_rank;
  context.dp_size = c.dp_size;
  context.optimizer = c.optimizer_yaml != nullptr ? YAML::Load(c.optimizer_yaml) : YAML::Node();
  context.host = Host(c.host);
  return context;
}

StageOutput ModelRef::forward(const StageInput& input) const {
  const std::vector<at::Tensor> boundary = input.boundary();
  triax_stage_io io{};
  io.struct_size = sizeof(io);
  io.input_ids = borrow_handle(input.input_ids);
  io.label_ids = borrow_handle(input.label_ids);
  io.label_mask = borrow_handle(input.label_mask);
  io.hidden_in = boundary.empty() ? nullptr : borrow_handle(boundary.front());
  io.boundary_in_count = detail::checked_boundary_count(static_cast<int32_t>(boundary.size()));
  for (size_t i = 0; i < boundary.size(); ++i) io.boundary_in[i] = borrow_handle(boundary[i]);
  io.want_logits = input.want_logits ? 1 : 0;
  io.position_ids = borrow_handle(input.position_ids);
  io.weight_gradients = input.weight_gradients;
  triax_error error{};
  throw_if_failed(ref_.vtable->forward(ref_.model, &io, &error), error);
  StageOutput output;
  output.hidden_out = adopt_handle(io.hidden_out);
  output.loss = adopt_handle(io.loss);
  output.aux_loss = adopt_handle(io.aux_loss);
  output.logits = adopt_handle(io.logits);
  output.aux_losses = detail::named_aux_losses(io.aux_losses, detail::aux_loss_names_of(ref_));
  // The first tensor in either spelling, the others after it.
  const int32_t count = detail::checked_boundary_count(io.boundary_out_count);
  at::Tensor first_in_list = adopt_handle(io.boundary_out[0]);
  if (!output.hidden_out.defined()) output.hidden_out = first_in_list;
  if (count > 1) {
    output.boundary_out.push_back(output.hidden_out);
    for (int32_t i = 1; i < count; ++i) output.boundary_out.push_back(adopt_handle(io.boundary_out[i]));
  }
  return output;
}

StepRequest::StepRequest(const triax_step_request& request) : request_(request) {
  if (request.struct_size >= offsetof(triax_step_request, pass_timed) + sizeof(request.pass_timed))
    pass_timed_ = request.pass_timed;
  // A host before 1.3 passes one model and calls every backward after_backward.
  const bool lists_chunks = request.struct_size >= offsetof(triax_step_request, after_chunk_backward) +
                                                       sizeof(request.after_chunk_backward) &&
                            request.model_count > 0 && request.models != nullptr;
  if (!lists_chunks) {
    models_.emplace_back(request.model);
    return;
  }
  for (int32_t c = 0; c < request.model_count; ++c) models_.emplace_back(request.models[c]);
  chunk_hook_ = request.after_chunk_backward != nullptr;
}

StageInput StepRequest::micro_batch(int index) const {
  triax_stage_io io{};
  io.struct_size = sizeof(io);
  triax_error error{};
  throw_if_failed(request_.batches.next(request_.batches.self, index, &io, &error), error);
  // The source hands over new references.
  StageInput input;
  input.input_ids = adopt_handle(io.input_ids);
  input.label_ids = adopt_handle(io.label_ids);
  input.label_mask = adopt_handle(io.label_mask);
  input.hidden_in = adopt_handle(io.hidden_in);
  input.position_ids = adopt_handle(io.position_ids);
  return input;
}

void StepRequest::pass_timed(triax_pass_kind kind, int chunk, int index, double seconds) const {
  if (pass_timed_ != nullptr) pass_timed_(request_.hooks_self, kind, chunk, index, seconds);
}

void StepRequest::after_backward(int chunk, int index) const {
  if (chunk < 0 || chunk >= chunk_count())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "after_backward: chunk " + std::to_string(chunk) + " of " + std::to_string(chunk_count()));
  triax_error error{};
  if (chunk_hook_) {
    throw_if_failed(request_.after_chunk_backward(request_.hooks_self, chunk, index, &error), error);
  } else if (chunk_count() > 1) {
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "the host listed model chunks without after_chunk_backward");
  } else if (request_.after_backward != nullptr) {
    throw_if_failed(request_.after_backward(request_.hooks_self, index, &error), error);
  }
}

}  // namespace triax
