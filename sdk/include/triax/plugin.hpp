// Registering C++ plugin classes behind the C ABI.
//
//   class MyModel : public triax::Model {
//    public:
//     static std::vector<double> block_costs(triax::ConfigReader& config, int64_t sequence_length);
//     static std::shared_ptr<MyModel> create(triax::ConfigReader& config, const triax::ModelContext& context);
//     ...
//   };
//   TRIAX_PLUGIN_LIBRARY(triax::model_plugin<MyModel>("my_model", "1.0.0", "what it is"))
//
// Optional static members of a model class fill the ABI 1.3 members of its table:
//   static constexpr const char* kNanotronMarker = "is_my_config";    (+ kNanotronMarkerRequires)
//   static constexpr const char* kFlopsFormula = "6N + 12*L*h*s";
//   static int64_t vocab_size(triax::ConfigReader& model_config);
//   static triax::HfMapping hf_mapping();                              (triax/hf_mapping.hpp)
// and of ABI 1.5:
//   static constexpr bool kSupportsMup = true;   model.init_method.use_mup (triax/spectral_mup.hpp):
//                                                its parameters declare their roles and its create
//                                                initialises through init_scaled or init_spectral_mup
// and of ABI 1.7:
//   static constexpr bool kRecomputesMlpActivation = true;   parallelism.recompute_mlp_activation:
//                                                its MLPs honour ModelContext::recompute_mlp_activation
//
// Engines provide `static std::unique_ptr<E> create(const triax::EngineContext&)`, and may provide
// `int model_chunks() const` to ask for that many model chunks per pipeline rank and (ABI 1.13)
// `triax_chunk_placement chunk_placement() const` to place them other than interleaved; optimizers
// `static std::unique_ptr<O> create(const triax::OptimizerContext&, std::vector<triax::OptimizerParam>)`.
// The macro emits the library's one exported C function; every call into the plugin goes
// through adapters that turn exceptions into a status and a message.
#pragma once

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "triax/abi.h"
#include "triax/aux_losses.hpp"
#include "triax/config_reader.hpp"
#include "triax/engine.hpp"
#include "triax/error.hpp"
#include "triax/fp8.hpp"
#include "triax/hf_mapping.hpp"
#include "triax/layers/deferred_weight_gradients.hpp"
#include "triax/model.hpp"
#include "triax/optimizer.hpp"
#include "triax/tensor_handle.hpp"
#include "triax/torch_version.hpp"

namespace triax {
namespace detail {

void write_error(triax_error* error, const char* message);

// Runs `body`, turning any exception into a status and a message.
template <class Body>
triax_status guarded(triax_error* error, Body&& body) {
  try {
    body();
    return TRIAX_OK;
  } catch (const Error& e) {
    write_error(error, e.what());
    return e.status();
  } catch (const YAML::Exception& e) {
    write_error(error, e.what());
    return TRIAX_ERROR_INVALID_CONFIG;
  } catch (const c10::Error& e) {
    write_error(error, e.what_without_backtrace());
    return TRIAX_ERROR_RUNTIME;
  } catch (const std::exception& e) {
    write_error(error, e.what());
    return TRIAX_ERROR_RUNTIME;
  } catch (...) {
    write_error(error, "unknown exception");
    return TRIAX_ERROR_RUNTIME;
  }
}

void fill_parameter_info(const NamedParameter& parameter, triax_parameter_info* out);
StageInput stage_input_from_c(const triax_stage_io& io);
void stage_output_to_c(StageOutput output, triax_stage_io* io);
// Moves output.aux_losses into io->aux_losses (a host before ABI 1.3 gets their sum as aux_loss).
void stage_aux_losses_to_c(StageOutput& output, const std::vector<std::string>& names, triax_stage_io* io);
void fill_optimizer_state(const OptimizerState& state, triax_optimizer_state* out);
// A model's QK-clip factors into the C arrays (new references), refused beyond capacity.
void qk_clip_factors_to_c(const std::vector<std::pair<int64_t, at::Tensor>>& factors, int64_t* indices,
                          triax_tensor** out, int32_t capacity, int32_t* count);
// The C arrays of scale_parameters as (index, factor) pairs (borrowed views).
std::vector<std::pair<int64_t, at::Tensor>> parameter_factors_from_c(const int64_t* indices,
                                                                      triax_tensor* const* factors, int64_t count);
// A model's inference cache as the opaque handle that crosses the ABI, and back.
triax_cache* cache_to_c(std::unique_ptr<InferenceCache> cache);
InferenceCache* cache_from_c(triax_cache* cache);
std::vector<InferenceCache*> caches_from_c(triax_cache* const* caches, int32_t count);

// Which optional static members a model class has (see the top of this file).
template <class M, class = void>
struct HasNanotronMarker : std::false_type {};
template <class M>
struct HasNanotronMarker<M, std::void_t<decltype(M::kNanotronMarker)>> : std::true_type {};
template <class M, class = void>
struct HasNanotronMarkerRequires : std::false_type {};
template <class M>
struct HasNanotronMarkerRequires<M, std::void_t<decltype(M::kNanotronMarkerRequires)>> : std::true_type {};
template <class M, class = void>
struct HasFlopsFormula : std::false_type {};
template <class M>
struct HasFlopsFormula<M, std::void_t<decltype(M::kFlopsFormula)>> : std::true_type {};
template <class M, class = void>
struct HasVocabSize : std::false_type {};
template <class M>
struct HasVocabSize<M, std::void_t<decltype(M::vocab_size(std::declval<ConfigReader&>()))>> : std::true_type {};
template <class M, class = void>
struct HasHfMapping : std::false_type {};
template <class M>
struct HasHfMapping<M, std::void_t<decltype(M::hf_mapping())>> : std::true_type {};
template <class M, class = void>
struct SupportsMup : std::false_type {};
template <class M>
struct SupportsMup<M, std::void_t<decltype(M::kSupportsMup)>> : std::bool_constant<M::kSupportsMup> {};

template <class M, class = void>
struct RecomputesMlpActivation : std::false_type {};
template <class M>
struct RecomputesMlpActivation<M, std::void_t<decltype(M::kRecomputesMlpActivation)>>
    : std::bool_constant<M::kRecomputesMlpActivation> {};

template <class M>
struct ModelBox {
  std::shared_ptr<M> model;
  std::string resolved;
};

template <class M>
struct ModelAdapter {
  static ModelBox<M>* box(triax_model* handle) { return reinterpret_cast<ModelBox<M>*>(handle); }

  static triax_status describe_blocks(const char* yaml, int64_t sequence_length, double* costs, int32_t capacity,
                                      int32_t* count, triax_error* error) {
    return guarded(error, [&] {
      ConfigReader config = ConfigReader::from_text(yaml, "model.model_config");
      std::vector<double> blocks = M::block_costs(config, sequence_length);
      *count = static_cast<int32_t>(blocks.size());
      if (costs != nullptr)
        for (int32_t i = 0; i < capacity && i < *count; ++i) costs[i] = blocks[i];
    });
  }
  static triax_status create(const char* yaml, const triax_model_context* context, triax_model** out,
                             triax_error* error) {
    return guarded(error, [&] {
      ConfigReader config = ConfigReader::from_text(yaml, "model.model_config");
      auto holder = std::make_unique<ModelBox<M>>();
      const ModelContext model_context = ModelContext::from_c(*context);
      holder->model = M::create(config, model_context);
      convert_linears_to_fp8(*holder->model, model_context);
      holder->resolved = holder->model->resolved_config();
      holder->model->parameter_table();
      holder->model->prepare_parameters();
      *out = reinterpret_cast<triax_model*>(holder.release());
    });
  }
  static void destroy(triax_model* handle) { delete box(handle); }
  static triax_status forward(triax_model* handle, triax_stage_io* io, triax_error* error) {
    return guarded(error, [&] {
      const StageInput input = stage_input_from_c(*io);
      const WeightGradientDeferral deferral(input.weight_gradients);
      StageOutput output = box(handle)->model->forward(input);
      stage_aux_losses_to_c(output, box(handle)->model->aux_loss_name_table(), io);
      stage_output_to_c(std::move(output), io);
    });
  }
  static int32_t aux_loss_names(triax_model* handle, const char** names, int32_t capacity) {
    const std::vector<std::string>& table = box(handle)->model->aux_loss_name_table();
    const int32_t count = std::min<int32_t>(capacity, static_cast<int32_t>(table.size()));
    for (int32_t i = 0; i < count; ++i) names[i] = table[static_cast<size_t>(i)].c_str();
    return count;
  }
  static int64_t parameter_count(triax_model* handle) {
    return static_cast<int64_t>(box(handle)->model->parameter_table().size());
  }
  static triax_status parameter_info(triax_model* handle, int64_t index, triax_parameter_info* out,
                                     triax_error* error) {
    return guarded(error, [&] {
      const auto& table = box(handle)->model->parameter_table();
      if (index < 0 || index >= static_cast<int64_t>(table.size()))
        throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "parameter index " + std::to_string(index) + " out of range");
      fill_parameter_info(table[static_cast<size_t>(index)], out);
    });
  }
  static double flops_per_token(triax_model* handle, int64_t sequence_length) {
    return box(handle)->model->flops_per_token(sequence_length);
  }
  static int64_t total_parameters(triax_model* handle) { return box(handle)->model->total_parameters(); }
  static triax_status set_training(triax_model* handle, int32_t training, triax_error* error) {
    return guarded(error, [&] { box(handle)->model->train(training != 0); });
  }
  static const char* resolved_config(triax_model* handle) { return box(handle)->resolved.c_str(); }
  static triax_status cache_create(triax_model* handle, int64_t max_tokens, triax_cache** out, triax_error* error) {
    return guarded(error, [&] { *out = cache_to_c(box(handle)->model->create_cache(max_tokens)); });
  }
  static void cache_destroy(triax_model*, triax_cache* cache) { delete cache_from_c(cache); }
  static int64_t cache_length(triax_model*, const triax_cache* cache) {
    return cache_from_c(const_cast<triax_cache*>(cache))->length();
  }
  static triax_status forward_cached(triax_model* handle, triax_cache* const* caches, int32_t count, triax_stage_io* io,
                                     triax_error* error) {
    return guarded(error, [&] {
      stage_output_to_c(box(handle)->model->forward_cached(caches_from_c(caches, count), stage_input_from_c(*io)), io);
    });
  }
  static triax_status track_attention_logits(triax_model* handle, int32_t enable, triax_error* error) {
    return guarded(error, [&] { box(handle)->model->track_attention_logits(enable != 0); });
  }
  static triax_status qk_clip_factors(triax_model* handle, double threshold, int64_t* indices, triax_tensor** factors,
                                      int32_t capacity, int32_t* count, triax_error* error) {
    return guarded(error, [&] {
      qk_clip_factors_to_c(box(handle)->model->qk_clip_factors(threshold), indices, factors, capacity, count);
    });
  }
  static triax_status vocab_size(const char* yaml, int64_t* out, triax_error* error) {
    return guarded(error, [&] {
      ConfigReader config = ConfigReader::from_text(yaml, "model.model_config");
      if constexpr (HasVocabSize<M>::value) *out = M::vocab_size(config);
      (void)out;
    });
  }

  // Members by name, one per line: later ABI minors append theirs.
  static triax_model_vtable make_vtable() {
    triax_model_vtable table{};
    table.struct_size = sizeof(triax_model_vtable);
    table.describe_blocks = describe_blocks;
    table.create = create;
    table.destroy = destroy;
    table.forward = forward;
    table.parameter_count = parameter_count;
    table.parameter_info = parameter_info;
    table.flops_per_token = flops_per_token;
    table.total_parameters = total_parameters;
    table.set_training = set_training;
    table.resolved_config = resolved_config;
    if constexpr (HasNanotronMarker<M>::value) table.nanotron_marker = M::kNanotronMarker;
    if constexpr (HasNanotronMarkerRequires<M>::value) table.nanotron_marker_requires = M::kNanotronMarkerRequires;
    if constexpr (HasFlopsFormula<M>::value) table.flops_formula = M::kFlopsFormula;
    if constexpr (HasVocabSize<M>::value) table.vocab_size = vocab_size;
    if constexpr (HasHfMapping<M>::value) table.hf = HfAdapter<M>::vtable();
    table.cache_create = cache_create;
    table.cache_destroy = cache_destroy;
    table.cache_length = cache_length;
    table.forward_cached = forward_cached;
    table.aux_loss_names = aux_loss_names;
    if constexpr (SupportsMup<M>::value) table.capabilities |= TRIAX_MODEL_SPECTRAL_MUP;
    if constexpr (RecomputesMlpActivation<M>::value) table.capabilities |= TRIAX_MODEL_RECOMPUTE_MLP_ACTIVATION;
    table.track_attention_logits = track_attention_logits;
    table.qk_clip_factors = qk_clip_factors;
    return table;
  }
  static const triax_model_vtable* vtable() {
    static const triax_model_vtable table = make_vtable();
    return &table;
  }
};

void step_result_to_c(StepResult result, triax_step_result* out);
// result.aux_losses into out->aux_losses, by the names of the request's model (a host before ABI
// 1.3 gets none).
void step_aux_losses_to_c(StepResult& result, const triax_step_request& request, triax_step_result* out);
std::vector<OptimizerParam> optimizer_params_from_c(const triax_optimizer_param* params, int64_t count);
// Each parameter's gradient group from context.gradient_groups (ABI 1.3; dp without it).
void apply_gradient_groups(const triax_optimizer_context& context, std::vector<OptimizerParam>& params);
// Each parameter's lr_scale from context.lr_scales (ABI 1.5; 1 without it).
void apply_lr_scales(const triax_optimizer_context& context, std::vector<OptimizerParam>& params);
// Each parameter's global shape and shard offset from context.layouts (ABI 1.12; none without it).
void apply_layouts(const triax_optimizer_context& context, std::vector<OptimizerParam>& params);

// Whether engine class E asks for model chunks (`int model_chunks() const`).
template <class E, class = void>
struct asks_for_model_chunks : std::false_type {};
template <class E>
struct asks_for_model_chunks<E, std::void_t<decltype(std::declval<const E&>().model_chunks())>> : std::true_type {};

// Whether engine class E places its chunks (`triax_chunk_placement chunk_placement() const`).
template <class E, class = void>
struct places_model_chunks : std::false_type {};
template <class E>
struct places_model_chunks<E, std::void_t<decltype(std::declval<const E&>().chunk_placement())>> : std::true_type {};

template <class E>
struct EngineAdapter {
  static triax_status create(const triax_engine_context* context, triax_engine** out, triax_error* error) {
    return guarded(error, [&] {
      std::unique_ptr<Engine> engine = E::create(EngineContext::from_c(*context));
      *out = reinterpret_cast<triax_engine*>(engine.release());
    });
  }
  static void destroy(triax_engine* handle) { delete reinterpret_cast<Engine*>(handle); }
  static triax_status train_step(triax_engine* handle, const triax_step_request* request, triax_step_result* result,
                                 triax_error* error) {
    return guarded(error, [&] {
      StepResult step = reinterpret_cast<Engine*>(handle)->train_step(StepRequest(*request));
      step_aux_losses_to_c(step, *request, result);
      step_result_to_c(std::move(step), result);
    });
  }
  // A count below 1 tells the host that the engine failed to answer.
  static int32_t model_chunks(triax_engine* handle) {
    try {
      return static_cast<int32_t>(static_cast<const E*>(reinterpret_cast<Engine*>(handle))->model_chunks());
    } catch (...) {
      return -1;
    }
  }
  static int32_t chunk_placement(triax_engine* handle) {
    return static_cast<int32_t>(static_cast<const E*>(reinterpret_cast<Engine*>(handle))->chunk_placement());
  }
  static triax_engine_vtable make_vtable() {
    triax_engine_vtable table{};
    table.struct_size = sizeof(triax_engine_vtable);
    table.create = create;
    table.destroy = destroy;
    table.train_step = train_step;
    if constexpr (asks_for_model_chunks<E>::value) table.model_chunks = model_chunks;
    if constexpr (places_model_chunks<E>::value) table.chunk_placement = chunk_placement;
    return table;
  }
  static const triax_engine_vtable* vtable() {
    static const triax_engine_vtable table = make_vtable();
    return &table;
  }
};

template <class O>
struct OptimizerAdapter {
  static triax_status create(const triax_optimizer_context* context, const triax_optimizer_param* params, int64_t count,
                             triax_optimizer** out, triax_error* error) {
    return guarded(error, [&] {
      std::vector<OptimizerParam> list = optimizer_params_from_c(params, count);
      apply_gradient_groups(*context, list);
      apply_lr_scales(*context, list);
      apply_layouts(*context, list);
      std::unique_ptr<Optimizer> optimizer = O::create(OptimizerContext::from_c(*context), std::move(list));
      *out = reinterpret_cast<triax_optimizer*>(optimizer.release());
    });
  }
  static void destroy(triax_optimizer* handle) { delete reinterpret_cast<Optimizer*>(handle); }
  static triax_status step(triax_optimizer* handle, triax_tensor* const* grads, int64_t count, double learning_rate,
                           triax_error* error) {
    return guarded(error, [&] {
      std::vector<at::Tensor> tensors;
      tensors.reserve(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) tensors.push_back(view_handle(grads[i]));
      reinterpret_cast<Optimizer*>(handle)->step(tensors, learning_rate);
    });
  }
  static triax_status step_scaled(triax_optimizer* handle, triax_tensor* const* grads, int64_t count,
                                  double learning_rate, triax_tensor* grad_scale, triax_error* error) {
    return guarded(error, [&] {
      std::vector<at::Tensor> tensors;
      tensors.reserve(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) tensors.push_back(view_handle(grads[i]));
      const at::Tensor scale = grad_scale != nullptr ? view_handle(grad_scale) : at::Tensor();
      reinterpret_cast<Optimizer*>(handle)->step_scaled(tensors, learning_rate, scale);
    });
  }
  static int64_t state_bytes(triax_optimizer* handle) { return reinterpret_cast<Optimizer*>(handle)->state_bytes(); }
  static int64_t state_count(triax_optimizer* handle) {
    try {
      return static_cast<int64_t>(reinterpret_cast<Optimizer*>(handle)->state_table().size());
    } catch (...) {
      return -1;
    }
  }
  static triax_status state_entry(triax_optimizer* handle, int64_t index, triax_optimizer_state* out,
                                  triax_error* error) {
    return guarded(error, [&] {
      const auto& table = reinterpret_cast<Optimizer*>(handle)->state_table();
      if (index < 0 || index >= static_cast<int64_t>(table.size()))
        throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "optimizer state index " + std::to_string(index) + " out of range");
      fill_optimizer_state(table[static_cast<size_t>(index)], out);
    });
  }
  static triax_status state_loaded(triax_optimizer* handle, triax_error* error) {
    return guarded(error, [&] { reinterpret_cast<Optimizer*>(handle)->state_loaded(); });
  }
  static double qk_clip_threshold(triax_optimizer* handle) {
    return reinterpret_cast<Optimizer*>(handle)->qk_clip_threshold();
  }
  static triax_status scale_parameters(triax_optimizer* handle, const int64_t* indices, triax_tensor* const* factors,
                                       int64_t count, triax_error* error) {
    return guarded(error, [&] {
      reinterpret_cast<Optimizer*>(handle)->scale_parameters(parameter_factors_from_c(indices, factors, count));
    });
  }
  // NULL tells the host to keep the section as given (also when the plugin failed to say).
  static const char* resolved_config(triax_optimizer* handle) {
    try {
      const std::string& text = reinterpret_cast<Optimizer*>(handle)->resolved_config_text();
      return text.empty() ? nullptr : text.c_str();
    } catch (...) {
      return nullptr;
    }
  }
  static const triax_optimizer_vtable* vtable() {
    static const triax_optimizer_vtable table = {sizeof(triax_optimizer_vtable),
                                                 create,
                                                 destroy,
                                                 step,
                                                 state_bytes,
                                                 O::kGradientSharding,
                                                 state_count,
                                                 state_entry,
                                                 state_loaded,
                                                 step_scaled,
                                                 resolved_config,
                                                 qk_clip_threshold,
                                                 scale_parameters};
    return &table;
  }
};

}  // namespace detail

template <class M>
triax_plugin_descriptor model_plugin(const char* name, const char* version, const char* description) {
  return {TRIAX_PLUGIN_MODEL, name, version, description, detail::ModelAdapter<M>::vtable()};
}
template <class E>
triax_plugin_descriptor engine_plugin(const char* name, const char* version, const char* description) {
  return {TRIAX_PLUGIN_ENGINE, name, version, description, detail::EngineAdapter<E>::vtable()};
}
template <class O>
triax_plugin_descriptor optimizer_plugin(const char* name, const char* version, const char* description) {
  return {TRIAX_PLUGIN_OPTIMIZER, name, version, description, detail::OptimizerAdapter<O>::vtable()};
}

}  // namespace triax

// Emits the library's entry point: one manifest listing the given plugin descriptors.
#define TRIAX_PLUGIN_LIBRARY(...)                                                                                      \
  extern "C" TRIAX_PLUGIN_EXPORT const triax_plugin_manifest* triax_plugin_entry(void) {                               \
    static const triax_plugin_descriptor descriptors[] = {__VA_ARGS__};                                                \
    static const triax_plugin_manifest manifest = {TRIAX_ABI_VERSION_MAJOR,                                            \
                                                   TRIAX_ABI_VERSION_MINOR,                                            \
                                                   TRIAX_TORCH_VERSION_STRING,                                         \
                                                   TRIAX_CXX11_ABI_FLAG,                                               \
                                                   static_cast<int32_t>(sizeof(descriptors) / sizeof(descriptors[0])), \
                                                   descriptors};                                                       \
    return &manifest;                                                                                                  \
  }
