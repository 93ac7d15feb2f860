// Switching the SDK's linears to fp8 (triax/fp8.hpp): each layer checks that its shard fits the
// fp8 products, and convert_linears_to_fp8 picks the layers by their module names.
#include <algorithm>
#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "fp8_matmul.hpp"
#include "recorded_amax.hpp"
#include "triax/environment_switch.hpp"
#include "triax/error.hpp"
#include "triax/fp8.hpp"
#include "triax/fp8_weight_amax.hpp"
#include "triax/glob_match.hpp"
#include "triax/layers/fp8_grouped_linear.hpp"
#include "triax/layers/fp8_weight_cache.hpp"
#include "triax/layers/grouped_query_attention.hpp"
#include "triax/layers/linear.hpp"
#include "triax/layers/pre_norm_decoder_layer.hpp"
#include "triax/model.hpp"

namespace triax {
namespace {

// Set once a layer of this process computes in tensorwise fp8: its weight's cast can take the
// amax the optimizer records (fp8_weight_amaxes_wanted).
std::atomic<bool> tensorwise_fp8_layers{false};

// cuBLASLt's fp8 kernels need both dimensions of the weight in multiples of 16; so does the
// emulation, which the CPU tests use to stand for the GPU.
void require_fp8_shape(const at::Tensor& matrix, const std::string& name) {
  const int64_t out = matrix.size(0), in = matrix.size(1);
  if (out % 16 != 0 || in % 16 != 0)
    throw Error(TRIAX_ERROR_INVALID_CONFIG,
                "fp8.linears: layer '" + name + "' is [out " + std::to_string(out) + ", in " + std::to_string(in) +
                    "] on this tensor-parallel rank; fp8 products need both dimensions in multiples of 16 "
                    "(leave the layer out of fp8.linears, or train it without fp8)");
}

std::array<int64_t, 2> shape_of(const at::Tensor& matrix) { return {matrix.size(0), matrix.size(1)}; }

// The default choice of layers (every linear) leaves in bf16 the products too small for fp8 to
// repay its casts: the smaller of N and K below fp8.min_gemm_size. Patterns of the config's own
// choose exactly the layers they name.
bool too_small_for_fp8(const Fp8Options& options, const std::array<int64_t, 2>& shape) {
  return options.linears == Fp8Options().linears && std::min(shape[0], shape[1]) < options.min_gemm_size;
}

// Grouped products (the MoE experts) go to fp8 by the linears' patterns and size rule, with
// rowwise scales only: at::_scaled_grouped_mm takes e4m3 operands and rowwise scales, not the
// tensorwise recipe's e5m2 gradients. With the default patterns a tensorwise run keeps them in the
// model's dtype (said once); patterns of the config's own that name them are refused.
// They stay in the model's dtype unless TRIAX_FP8_EXPERTS=1 (read at each conversion): the grouped
// fp8 product is off until it has run and been timed on a GPU.
void convert_grouped_products(Fp8GroupedProducts& module, const std::string& name, const Fp8Options& options,
                              const ModelContext& context) {
  if (too_small_for_fp8(options, module.fp8_product_sides())) return;
  static std::atomic<bool> said{false};
  auto say_once = [&](const std::string& why) {
    if (!said.exchange(true))
      context.host.log(TRIAX_LOG_INFO, "fp8: the grouped products of '" + name +
                                           "' (and any like it) stay in the model's dtype: " + why);
  };
  if (options.recipe != Fp8Recipe::Rowwise) {
    if (options.linears != Fp8Options().linears)
      throw Error(TRIAX_ERROR_INVALID_CONFIG,
                  "fp8.recipe: tensorwise cannot train '" + name +
                      "' (grouped expert products) in fp8: at::_scaled_grouped_mm takes rowwise scales and e4m3 "
                      "gradients only; use fp8.recipe: rowwise, or leave it out of fp8.linears");
    say_once("fp8.recipe tensorwise (the grouped fp8 product is rowwise only; fp8.recipe: rowwise takes them)");
    return;
  }
  if (!switched_on_when_one("TRIAX_FP8_EXPERTS")) {
    say_once("TRIAX_FP8_EXPERTS is not 1 (the grouped fp8 product is off until measured on a GPU)");
    return;
  }
  module.compute_grouped_in_fp8(name);
}

// The norms of the SDK's decoder layer compute the amaxes of fp8 operands as they write them, so
// that those products need no pass of their own for them (docs/fp8.md): a norm's output is the
// input of the block after it; its input gradient is the output gradient of the projection
// whose output the norm's add takes (o_proj's before post_attention_layernorm, the previous
// layer's down projection before input_layernorm: layers are alike). Not in REDUCE_SCATTER mode:
// there the tensors are gathered (forward) or all-gathered (backward) into others on the way.
void record_norm_amaxes(torch::nn::Module& model, const std::vector<std::string>& fp8_layers,
                        const ModelContext& context) {
  if (context.tp_size > 1 && context.tp_mode == TpMode::ReduceScatter) return;
  auto feeds_fp8 = [&](const std::string& block) {  // an fp8 linear inside
    return std::any_of(fp8_layers.begin(), fp8_layers.end(),
                       [&](const std::string& name) { return name.rfind(block + ".", 0) == 0; });
  };
  for (const auto& item : model.named_modules("", /*include_self=*/false))
    if (auto layer = std::dynamic_pointer_cast<PreNormDecoderLayer>(item.value())) {
      const bool attention = feeds_fp8(item.key() + ".self_attn"), mlp = feeds_fp8(item.key() + ".mlp");
      layer->input_layernorm->record_amax(amax_recording(attention, mlp));
      layer->post_attention_layernorm->record_amax(amax_recording(mlp, attention));
    }
}

// The rotary kernel's backward writes the gradient of qkv_proj's output: with qkv_proj in fp8, it
// records that gradient's amax. In both tp modes: the column-parallel output gradient is taken as
// it arrives (its amax is all-reduced over tp by the product, as its own pass's was).
void record_rotary_gradient_amaxes(torch::nn::Module& model, const std::vector<std::string>& fp8_layers) {
  for (const auto& item : model.named_modules("", /*include_self=*/false))
    if (auto attention = std::dynamic_pointer_cast<GroupedQueryAttention>(item.value()))
      attention->record_qkv_gradient_amax(std::find(fp8_layers.begin(), fp8_layers.end(),
                                                    item.key() + ".qkv_proj") != fp8_layers.end());
}

}  // namespace

std::array<int64_t, 2> ColumnParallelLinear::matrix_shape() const { return shape_of(matrix()); }
std::array<int64_t, 2> RowParallelLinear::matrix_shape() const { return shape_of(matrix()); }

void ColumnParallelLinear::compute_in_fp8(Fp8Recipe recipe, const std::string& name) {
  if (keeps_model_dtype_)
    throw Error(TRIAX_ERROR_INVALID_CONFIG, "fp8.linears: layer '" + name + "' keeps the model's dtype");
  require_fp8_shape(matrix(), name);
  fp8_ = Fp8LinearPlan{recipe, tp_, /*input_features_sharded=*/false, /*output_features_sharded=*/tp_.size > 1,
                       std::make_shared<Fp8WeightCache>()};
}

void RowParallelLinear::compute_in_fp8(Fp8Recipe recipe, const std::string& name) {
  require_fp8_shape(matrix(), name);
  fp8_ = Fp8LinearPlan{recipe, tp_, /*input_features_sharded=*/tp_.size > 1, /*output_features_sharded=*/false,
                       std::make_shared<Fp8WeightCache>()};
}

void convert_linears_to_fp8(torch::nn::Module& model, const ModelContext& context) {
  if (!context.fp8) return;
  fp8::require_fp8_device(context.device, "fp8");
  const Fp8Options& options = *context.fp8;
  std::vector<std::string> converted;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    const std::string& name = item.key();
    bool chosen = false;
    for (const std::string& pattern : options.linears) chosen = chosen || glob_match(pattern, name);
    if (!chosen) continue;
    if (auto column = std::dynamic_pointer_cast<ColumnParallelLinear>(item.value())) {
      if (column->keeps_model_dtype() || too_small_for_fp8(options, column->matrix_shape())) continue;
      column->compute_in_fp8(options.recipe, name);
      converted.push_back(name);
    } else if (auto row = std::dynamic_pointer_cast<RowParallelLinear>(item.value())) {
      if (too_small_for_fp8(options, row->matrix_shape())) continue;
      row->compute_in_fp8(options.recipe, name);
      converted.push_back(name);
    } else if (auto grouped = std::dynamic_pointer_cast<Fp8GroupedProducts>(item.value())) {
      convert_grouped_products(*grouped, name, options, context);
    }
  }
  // Rowwise scales come from amaxes along a dimension: the norms' tensor amax would go unused.
  if (options.recipe != Fp8Recipe::Tensorwise) return;
  if (!converted.empty()) tensorwise_fp8_layers.store(true, std::memory_order_relaxed);
  record_norm_amaxes(model, converted, context);
  record_rotary_gradient_amaxes(model, converted);
}

bool fp8_weight_amaxes_wanted() {
  return tensorwise_fp8_layers.load(std::memory_order_relaxed) && fp8::producer_amax_enabled();
}

}  // namespace triax
