// Deferred weight gradients, the model's side (triax/layers/deferred_weight_gradients.hpp): the
// deferral in effect, the work handed to the engine's queue, and the linear product whose
// backward defers its weight's gradient.
#include "triax/layers/deferred_weight_gradients.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <utility>

#include "deferred_weight.hpp"
#include "triax/layers/decode_gemv.hpp"
#include "triax/error.hpp"

namespace triax {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

thread_local const triax_weight_gradient_queue* current_queue = nullptr;

// A product as the C ABI's deferred work: the queue's holder runs it, then releases it.
struct DeferredProduct {
  std::function<void()> product;

  static triax_status run(void* self, triax_error* error) {
    try {
      static_cast<DeferredProduct*>(self)->product();
      return TRIAX_OK;
    } catch (const std::exception& e) {
      std::snprintf(error->message, TRIAX_ERROR_MESSAGE_CAPACITY, "%s", e.what());
      return TRIAX_ERROR_RUNTIME;
    }
  }
  static void release(void* self) { delete static_cast<DeferredProduct*>(self); }
};

// y = x matrixᵀ with the matrix detached: backward returns the input's gradient and queues the
// matrix's, computed as autograd's backward of at::linear computes both.
struct DeferredLinearFunction : torch::autograd::Function<DeferredLinearFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& matrix,
                            const detail::DeferredWeight& weight) {
    weight.save(ctx);
    ctx->save_for_backward({x, matrix});
    return at::linear(x, matrix);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &matrix = saved[1];
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor()};
    const at::Tensor grad_rows = grads[0].reshape({-1, grads[0].size(-1)});
    at::Tensor grad_input;
    if (ctx->needs_input_grad(0)) grad_input = grad_rows.mm(matrix).view(x.sizes());
    const at::Tensor input_rows = x.reshape({-1, x.size(-1)});
    detail::DeferredWeight::saved(ctx).defer(
        [grad_rows, input_rows, matrix] { return linear_weight_gradient(grad_rows, input_rows, matrix); });
    return {grad_input, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

WeightGradientDeferral::WeightGradientDeferral(const triax_weight_gradient_queue* queue) : previous_(current_queue) {
  current_queue = queue;
}

WeightGradientDeferral::~WeightGradientDeferral() { current_queue = previous_; }

const triax_weight_gradient_queue* WeightGradientDeferral::current() { return current_queue; }

const triax_weight_gradient_queue* weight_gradient_queue_for(const at::Tensor& input, const at::Tensor& matrix) {
  if (current_queue == nullptr || !at::GradMode::is_enabled()) return nullptr;
  return input.requires_grad() && matrix.requires_grad() ? current_queue : nullptr;
}

void defer_weight_gradient(const triax_weight_gradient_queue& queue, std::function<void()> product) {
  auto* work = new DeferredProduct{std::move(product)};
  queue.defer(queue.self, {work, DeferredProduct::run, DeferredProduct::release});
}

at::Tensor linear_weight_gradient(const at::Tensor& grad_rows, const at::Tensor& input_rows, const at::Tensor& matrix) {
  const int64_t out = matrix.size(0);
  const bool stored_transposed = matrix.stride(0) == 1 && matrix.stride(1) == out;
  return stored_transposed ? input_rows.t().mm(grad_rows).t() : grad_rows.t().mm(input_rows);
}

void accumulate_weight_gradient(const at::Tensor& matrix, const at::Tensor& gradient) {
  if (gradient.sizes() != matrix.sizes()) throw Error("a deferred weight gradient of another shape than its weight");
  torch::autograd::backward({matrix}, {gradient});
}

at::Tensor deferrable_linear(const at::Tensor& x, const at::Tensor& matrix, const at::Tensor& bias) {
  const detail::DeferredWeight weight = detail::DeferredWeight::of(x, matrix);
  if (!weight.active()) {
    if (const at::Tensor product = decode_gemv(x, matrix); product.defined())
      return bias.defined() ? product + bias : product;
    return at::linear(x, matrix, bias);
  }
  const at::Tensor product = DeferredLinearFunction::apply(x, weight.operand(), weight);
  return bias.defined() ? product + bias : product;
}

namespace detail {

DeferredWeight DeferredWeight::of(const at::Tensor& input, const at::Tensor& matrix) {
  DeferredWeight weight;
  weight.matrix = matrix;
  if (const triax_weight_gradient_queue* queue = weight_gradient_queue_for(input, matrix)) weight.queue = *queue;
  return weight;
}

void DeferredWeight::defer(std::function<at::Tensor()> gradient) const {
  defer_weight_gradient(queue, [matrix = matrix, gradient = std::move(gradient)] {
    at::Tensor computed;
    {
      const at::NoGradGuard no_graph;
      computed = gradient();
    }
    accumulate_weight_gradient(matrix, computed);
  });
}

// AutogradContext keeps non-tensor state as IValues: the queue travels as its two addresses.
void DeferredWeight::save(AutogradContext* ctx) const {
  ctx->saved_data["deferred_queue"] = static_cast<int64_t>(reinterpret_cast<std::uintptr_t>(queue.self));
  ctx->saved_data["deferred_defer"] = static_cast<int64_t>(reinterpret_cast<std::uintptr_t>(queue.defer));
  ctx->saved_data["deferred_matrix"] = active() ? matrix : at::Tensor();
}

DeferredWeight DeferredWeight::saved(AutogradContext* ctx) {
  DeferredWeight weight;
  weight.queue.self = reinterpret_cast<void*>(static_cast<std::uintptr_t>(ctx->saved_data["deferred_queue"].toInt()));
  weight.queue.defer = reinterpret_cast<void (*)(void*, triax_deferred_work)>(
      static_cast<std::uintptr_t>(ctx->saved_data["deferred_defer"].toInt()));
  weight.matrix = ctx->saved_data["deferred_matrix"].toTensor();
  return weight;
}

}  // namespace detail
}  // namespace triax
