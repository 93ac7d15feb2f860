// The fp8 linear's autograd function (triax/layers/fp8_linear.hpp). Which operand is scaled how:
//
//   product       operands                tensorwise           rowwise (scale along the contraction)
//   y = x W^T     x [M,K], W^T [K,N]      e4m3, one scale each e4m3, x per row [M,1], W per row [1,N]
//   gx = gy W     gy [M,N], W [N,K]       gy e5m2, W e4m3      e4m3, gy per row [M,1], W per column [1,K]
//   gW = gy^T x   gy^T [N,M], x [M,K]     gy e5m2, x e4m3      e4m3, gy per column [N,1], x per column [1,K]
//
// cuBLASLt reads both operands of an fp8 product along the contraction: backward needs x, W and
// gy transposed, which the scaling kernel writes from the same read (fp8_matmul.hpp, Layout).
// Tensorwise keeps the transposed fp8 x and W of the forward for backward (a tensorwise scale does
// not depend on the layout), so the layer's saved activation is half the size of the bf16 one.
// Rowwise scales depend on the contraction, so it keeps x (as the bf16 layer does) and quantises
// again in backward.
#include "triax/layers/fp8_linear.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <functional>

#include "deferred_weight.hpp"
#include "fp8_matmul.hpp"
#include "saved_tensor_parallel.hpp"
#include "triax/error.hpp"
#include "triax/layers/fp8_weight_cache.hpp"

namespace triax {
namespace {

using fp8::Fp8Matrix;
using fp8::Layout;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr c10::ScalarType kE4m3 = c10::ScalarType::Float8_e4m3fn;
constexpr c10::ScalarType kE5m2 = c10::ScalarType::Float8_e5m2;

// grad_weight = gy^T x from the fp8 operands [N, M] and [K, M] (row-major along the tokens).
at::Tensor weight_gradient(const at::Tensor& gy_t, const at::Tensor& gy_t_scale, const at::Tensor& x_t,
                           const at::Tensor& x_scale, c10::ScalarType weight_dtype) {
  return fp8::scaled_matmul(fp8::pad_columns_to_16(gy_t), gy_t_scale, fp8::pad_columns_to_16(x_t).t(), x_scale,
                            weight_dtype, /*fast_accumulation=*/false);
}

class Fp8LinearFunction : public torch::autograd::Function<Fp8LinearFunction> {
 public:
  // x [M, K], weight [N, K] -> [M, N].
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const Fp8LinearPlan& plan, const detail::DeferredWeight& deferred) {
    const bool tensorwise = plan.recipe == Fp8Recipe::Tensorwise;
    const int64_t scale_dim = tensorwise ? -1 : 1;
    // A tensorwise weight scale spans the whole weight, split over tp either way; a rowwise one
    // spans the input features only.
    const bool weight_sharded = tensorwise ? plan.input_features_sharded || plan.output_features_sharded
                                           : plan.input_features_sharded;
    // Tensorwise backward reuses the forward's fp8 operands, transposed.
    const bool weight_gradient = weight.requires_grad() || deferred.active();
    const Layout layout = tensorwise && (x.requires_grad() || weight_gradient) ? Layout::Both : Layout::RowMajor;
    const Fp8Matrix xq = fp8::quantise(x, {kE4m3, scale_dim, plan.input_features_sharded}, plan.tp, layout);
    const fp8::Scaling weight_scaling{kE4m3, scale_dim, weight_sharded};
    const Fp8Matrix wq = tensorwise && plan.weight_cache
                             ? plan.weight_cache->get(weight, weight_scaling, plan.tp, layout)
                             : fp8::quantise(weight, weight_scaling, plan.tp, layout);
    at::Tensor y = fp8::scaled_matmul(xq.data, xq.scale, wq.data.t(), wq.scale.t(), x.scalar_type(),
                                      /*fast_accumulation=*/true);

    detail::save_tensor_parallel(ctx, plan.tp);
    deferred.save(ctx);
    ctx->saved_data["recipe"] = static_cast<int64_t>(plan.recipe);
    ctx->saved_data["output_sharded"] = plan.output_features_sharded;
    ctx->saved_data["x_dtype"] = x.scalar_type();
    ctx->saved_data["weight_dtype"] = weight.scalar_type();
    if (layout == Layout::Both)
      ctx->save_for_backward({xq.transposed, xq.scale, wq.transposed, wq.scale});
    else
      ctx->save_for_backward({x, weight});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const TensorParallel tp = detail::saved_tensor_parallel(ctx);
    const bool tensorwise = ctx->saved_data["recipe"].toInt() == static_cast<int64_t>(Fp8Recipe::Tensorwise);
    const bool output_sharded = ctx->saved_data["output_sharded"].toBool();
    const c10::ScalarType x_dtype = ctx->saved_data["x_dtype"].toScalarType();
    const c10::ScalarType weight_dtype = ctx->saved_data["weight_dtype"].toScalarType();
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor grad_y = grads[0].contiguous();

    // grad_x = gy [M, N] W [N, K]; grad_weight = gy^T [N, M] x [M, K]: the operands by layout,
    // [rows, contraction] row-major, each with its scale. The weight's product runs now, or in W
    // when the forward's deferral queued it (with rowwise scales its operands are quantised then).
    at::Tensor gy, gy_scale, w_t, w_scale;
    std::function<at::Tensor()> weight_product;
    if (tensorwise) {
      const Fp8Matrix g = fp8::quantise(grad_y, {kE5m2, -1, output_sharded}, tp, Layout::Both);
      gy = g.data, gy_scale = g.scale, w_t = saved[2], w_scale = saved[3];
      weight_product = [gy_t = g.transposed, scale = g.scale, x_t = saved[0], x_scale = saved[1], weight_dtype] {
        return weight_gradient(gy_t, scale, x_t, x_scale, weight_dtype);
      };
    } else {
      const at::Tensor& x = saved[0];
      const at::Tensor& weight = saved[1];
      const Fp8Matrix g = fp8::quantise(grad_y, {kE4m3, 1, output_sharded}, tp);
      const Fp8Matrix w = fp8::quantise(weight, {kE4m3, 0, output_sharded}, tp, Layout::Transposed);
      gy = g.data, gy_scale = g.scale, w_t = w.transposed, w_scale = w.scale;
      weight_product = [grad_y, x, tp, weight_dtype] {
        // The token dimension is never split over tp: these scales need no reduction.
        const Fp8Matrix g_columns = fp8::quantise(grad_y, {kE4m3, 0, false}, tp, Layout::Transposed);
        const Fp8Matrix x_columns = fp8::quantise(x, {kE4m3, 0, false}, tp, Layout::Transposed);
        return weight_gradient(g_columns.transposed, g_columns.scale.t(), x_columns.transposed, x_columns.scale,
                               weight_dtype);
      };
    }
    at::Tensor grad_x, grad_weight;
    if (ctx->needs_input_grad(0))
      grad_x = fp8::scaled_matmul(gy, gy_scale, w_t.t(), w_scale, x_dtype, /*fast_accumulation=*/false);
    const detail::DeferredWeight deferred = detail::DeferredWeight::saved(ctx);
    if (deferred.active())
      deferred.defer(std::move(weight_product));
    else if (ctx->needs_input_grad(1))
      grad_weight = weight_product();
    return {grad_x, grad_weight, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor fp8_linear(const at::Tensor& x, const at::Tensor& weight, const Fp8LinearPlan& plan) {
  if (weight.dim() != 2 || x.size(-1) != weight.size(1))
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "fp8_linear: expected x [..., in] and weight [out, in]");
  std::vector<int64_t> out_shape = x.sizes().vec();
  out_shape.back() = weight.size(0);
  const at::Tensor rows = x.reshape({-1, x.size(-1)});
  const detail::DeferredWeight deferred = detail::DeferredWeight::of(rows, weight);
  return Fp8LinearFunction::apply(rows, deferred.operand(), plan, deferred).view(out_shape);
}

}  // namespace triax
