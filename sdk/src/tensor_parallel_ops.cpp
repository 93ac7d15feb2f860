// The SDK's custom autograd functions: tensor-parallel collectives and the vocabulary-parallel
// cross-entropy. They live in this one translation unit because custom_function.h is the
// heaviest LibTorch header the SDK needs.
#include "triax/layers/tensor_parallel_ops.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>
#include <limits>
#include <string>

#include "deferred_weight.hpp"
#include "saved_tensor_parallel.hpp"
#include "triax/error.hpp"
#include "triax/layers/deferred_weight_gradients.hpp"
#include "triax/layers/linear.hpp"

namespace triax {
namespace detail {

void save_tensor_parallel(torch::autograd::AutogradContext* ctx, const TensorParallel& tp) {
  ctx->saved_data["host"] = static_cast<int64_t>(reinterpret_cast<std::uintptr_t>(tp.host.c_host()));
  ctx->saved_data["rank"] = static_cast<int64_t>(tp.rank);
  ctx->saved_data["size"] = static_cast<int64_t>(tp.size);
  ctx->saved_data["mode"] = static_cast<int64_t>(tp.mode);
}

TensorParallel saved_tensor_parallel(torch::autograd::AutogradContext* ctx) {
  TensorParallel tp;
  tp.host = Host(reinterpret_cast<const triax_host*>(static_cast<std::uintptr_t>(ctx->saved_data["host"].toInt())));
  tp.rank = static_cast<int>(ctx->saved_data["rank"].toInt());
  tp.size = static_cast<int>(ctx->saved_data["size"].toInt());
  tp.mode = static_cast<TpMode>(ctx->saved_data["mode"].toInt());
  return tp;
}

}  // namespace detail

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

using detail::saved_tensor_parallel;
using detail::save_tensor_parallel;

at::Tensor all_reduce_sum(const at::Tensor& x, const TensorParallel& tp) {
  at::Tensor out = x.clone(at::MemoryFormat::Contiguous);  // the collective works in place
  tp.host.all_reduce(TRIAX_GROUP_TP, out, TRIAX_REDUCE_SUM);
  return out;
}

void require_sequence_dim(const at::Tensor& x, const char* op) {
  if (x.dim() < 2)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, std::string(op) + ": expected activations [batch, seq, ...], got " +
                                                  std::to_string(x.dim()) + " dimension(s)");
}

// The collectives join and split along dim 0: the sequence dim goes first, then back.
at::Tensor gather_dim1(const at::Tensor& x, const TensorParallel& tp) {
  require_sequence_dim(x, "all_gather_sequence");
  at::Tensor sequence_first = x.transpose(0, 1).contiguous();
  std::vector<int64_t> shape = sequence_first.sizes().vec();
  shape[0] *= tp.size;
  at::Tensor gathered = at::empty(shape, sequence_first.options());
  tp.host.all_gather(TRIAX_GROUP_TP, gathered, sequence_first);
  return gathered.transpose(0, 1).contiguous();
}

at::Tensor reduce_scatter_dim1(const at::Tensor& x, const TensorParallel& tp) {
  require_sequence_dim(x, "reduce_scatter_sequence");
  if (x.size(1) % tp.size != 0)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "reduce_scatter_sequence: sequence length " + std::to_string(x.size(1)) +
                                                  " is not divisible by the tensor parallel size " +
                                                  std::to_string(tp.size) + " (tp_mode REDUCE_SCATTER)");
  at::Tensor sequence_first = x.transpose(0, 1).contiguous();
  std::vector<int64_t> shape = sequence_first.sizes().vec();
  shape[0] /= tp.size;
  at::Tensor shard = at::empty(shape, sequence_first.options());
  tp.host.reduce_scatter(TRIAX_GROUP_TP, shard, sequence_first, TRIAX_REDUCE_SUM);
  return shard.transpose(0, 1).contiguous();
}

struct IdentityForwardAllReduceBackward : torch::autograd::Function<IdentityForwardAllReduceBackward> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const TensorParallel& tp) {
    save_tensor_parallel(ctx, tp);
    return x;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {all_reduce_sum(grads[0], saved_tensor_parallel(ctx)), at::Tensor()};
  }
};

struct AllReduceForwardIdentityBackward : torch::autograd::Function<AllReduceForwardIdentityBackward> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& x, const TensorParallel& tp) {
    return all_reduce_sum(x, tp);
  }
  static variable_list backward(AutogradContext*, variable_list grads) { return {grads[0], at::Tensor()}; }
};

struct AllGatherSequence : torch::autograd::Function<AllGatherSequence> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const TensorParallel& tp) {
    save_tensor_parallel(ctx, tp);
    return gather_dim1(x, tp);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {reduce_scatter_dim1(grads[0], saved_tensor_parallel(ctx)), at::Tensor()};
  }
};

struct ReduceScatterSequence : torch::autograd::Function<ReduceScatterSequence> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const TensorParallel& tp) {
    save_tensor_parallel(ctx, tp);
    return reduce_scatter_dim1(x, tp);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {gather_dim1(grads[0], saved_tensor_parallel(ctx)), at::Tensor()};
  }
};

// ---- column-parallel products with the collective overlapped (tp_linear_async_communication) ----
// The bias is added by the caller, after the product: an undefined tensor cannot be an input of
// an autograd function.

// The overlapped products' weight gradient, grad_rowsᵀ input_rows; or undefined, when the
// forward's deferral queued it for W.
at::Tensor weight_gradient_or_defer(AutogradContext* ctx, const at::Tensor& grad_rows, const at::Tensor& input_rows) {
  const detail::DeferredWeight deferred = detail::DeferredWeight::saved(ctx);
  if (!deferred.active()) return grad_rows.t().mm(input_rows);
  deferred.defer([grad_rows, input_rows] { return grad_rows.t().mm(input_rows); });
  return at::Tensor();
}

// [rows..., in] x [out, in]^T written into `out` [rows..., out] in place.
void project_into(at::Tensor out, const at::Tensor& input, const at::Tensor& matrix) {
  if (input.size(0) == 0) return;
  at::Tensor target = out.view({-1, matrix.size(0)});
  at::mm_out(target, input.reshape({-1, input.size(-1)}), matrix.t());
}

// REDUCE_SCATTER: the sequence shards gathered while this rank's own rows are multiplied, then
// the others' rows; backward reduce-scatters the input gradient during the weight gradient's GEMM
// (or, with the weight gradient deferred, without a GEMM beside it).
// The sequence goes first (the collectives join dim 0), so each rank's rows are one slice.
struct GatherThenProjectOverlapped : torch::autograd::Function<GatherThenProjectOverlapped> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& matrix,
                            const TensorParallel& tp, const detail::DeferredWeight& deferred) {
    require_sequence_dim(x, "column_parallel_linear");
    const at::Tensor local = x.transpose(0, 1).contiguous();  // [s/tp, b, in]
    const int64_t rows = local.size(0), first = tp.rank * rows;
    std::vector<int64_t> shape = local.sizes().vec();
    shape[0] *= tp.size;
    at::Tensor gathered = at::empty(shape, local.options());
    PendingCollective gather = tp.host.start_all_gather(TRIAX_GROUP_TP, gathered, local);
    shape.back() = matrix.size(0);
    at::Tensor out = at::empty(shape, local.options());  // [s, b, out/tp]
    project_into(out.narrow(0, first, rows), local, matrix);
    gather.wait();
    project_into(out.narrow(0, 0, first), gathered.narrow(0, 0, first), matrix);
    const int64_t after = first + rows;
    project_into(out.narrow(0, after, shape[0] - after), gathered.narrow(0, after, shape[0] - after), matrix);
    save_tensor_parallel(ctx, tp);
    deferred.save(ctx);
    ctx->save_for_backward({gathered, matrix});
    return out.transpose(0, 1).contiguous();
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const TensorParallel tp = saved_tensor_parallel(ctx);
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &gathered = saved[0], &matrix = saved[1];
    const at::Tensor grad = grads[0].transpose(0, 1).contiguous();  // [s, b, out/tp]
    const at::Tensor grad_rows = grad.view({-1, grad.size(-1)});
    const at::Tensor grad_input = grad_rows.mm(matrix).view(gathered.sizes());  // every rank's rows, partial
    std::vector<int64_t> shard_shape = gathered.sizes().vec();
    shard_shape[0] /= tp.size;
    at::Tensor grad_shard = at::empty(shard_shape, grad_input.options());
    PendingCollective reduce = tp.host.start_reduce_scatter(TRIAX_GROUP_TP, grad_shard, grad_input, TRIAX_REDUCE_SUM);
    at::Tensor grad_matrix = weight_gradient_or_defer(ctx, grad_rows, gathered.view({-1, gathered.size(-1)}));
    reduce.wait();
    return {grad_shard.transpose(0, 1).contiguous(), grad_matrix, at::Tensor(), at::Tensor()};
  }
};

// ALL_REDUCE: the plain product; backward all-reduces the input gradient during the weight
// gradient's GEMM (deferred: without a GEMM beside it).
struct ProjectThenReduceOverlapped : torch::autograd::Function<ProjectThenReduceOverlapped> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& matrix,
                            const TensorParallel& tp, const detail::DeferredWeight& deferred) {
    save_tensor_parallel(ctx, tp);
    deferred.save(ctx);
    ctx->save_for_backward({x, matrix});
    return at::matmul(x, matrix.t());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const TensorParallel tp = saved_tensor_parallel(ctx);
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &matrix = saved[1];
    const at::Tensor grad_rows = grads[0].reshape({-1, grads[0].size(-1)});
    at::Tensor grad_input = grad_rows.mm(matrix).view(x.sizes());
    PendingCollective reduce = tp.host.start_all_reduce(TRIAX_GROUP_TP, grad_input, TRIAX_REDUCE_SUM);
    at::Tensor grad_matrix = weight_gradient_or_defer(ctx, grad_rows, x.reshape({-1, x.size(-1)}));
    reduce.wait();
    return {grad_input, grad_matrix, at::Tensor(), at::Tensor()};
  }
};

struct VocabParallelTokenLosses : torch::autograd::Function<VocabParallelTokenLosses> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& scores, const at::Tensor& labels,
                            int64_t vocab_start, int64_t vocab_size, const TensorParallel& tp) {
    const int64_t local = scores.size(1);
    const bool multi_rank = tp.size > 1;
    at::Tensor z = scores.contiguous();
    const int64_t real = std::min(local, std::max<int64_t>(0, vocab_size - vocab_start));
    if (real < local) {  // padded vocabulary columns must never take probability
      z = z.clone();
      z.narrow(1, real, local - real).fill_(-std::numeric_limits<double>::infinity());
    }

    // Subtracting the global row max keeps exp() in range; it cancels out of the loss.
    at::Tensor row_max = std::get<0>(z.max(1));
    if (multi_rank) tp.host.all_reduce(TRIAX_GROUP_TP, row_max, TRIAX_REDUCE_MAX);
    at::Tensor shifted = z - row_max.unsqueeze(1);

    at::Tensor in_shard = labels.ge(vocab_start).logical_and(labels.lt(vocab_start + local));
    at::Tensor local_labels = at::where(in_shard, labels - vocab_start, at::zeros_like(labels)).unsqueeze(1);
    at::Tensor label_score =
        at::where(in_shard, shifted.gather(1, local_labels).squeeze(1), at::zeros({}, shifted.options()));

    at::Tensor exponentials = shifted.exp();
    // One collective for both sums: [sum of exp, label score] per token.
    at::Tensor sums = at::stack({exponentials.sum(1), label_score});
    if (multi_rank) tp.host.all_reduce(TRIAX_GROUP_TP, sums, TRIAX_REDUCE_SUM);
    at::Tensor sum_exp = sums.select(0, 0);

    at::Tensor softmax = exponentials.div_(sum_exp.unsqueeze(1));
    ctx->save_for_backward({softmax, local_labels, in_shard.unsqueeze(1).to(softmax.scalar_type())});
    return sum_exp.log() - sums.select(0, 1);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    variable_list saved = ctx->get_saved_variables();
    const at::Tensor& softmax = saved[0];
    const at::Tensor& local_labels = saved[1];
    const at::Tensor& one_hot_weight = saved[2];  // 1 where this rank holds the label's column
    at::Tensor grad = softmax.clone();
    grad.scatter_add_(1, local_labels, one_hot_weight.neg());
    grad.mul_(grads[0].to(grad.scalar_type()).unsqueeze(1));
    return {grad, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor identity_forward_all_reduce_backward(const at::Tensor& x, const TensorParallel& tp) {
  if (tp.size == 1) return x;
  return IdentityForwardAllReduceBackward::apply(x, tp);
}

at::Tensor all_reduce_forward_identity_backward(const at::Tensor& x, const TensorParallel& tp) {
  if (tp.size == 1) return x;
  return AllReduceForwardIdentityBackward::apply(x, tp);
}

at::Tensor all_gather_sequence(const at::Tensor& x, const TensorParallel& tp) {
  if (tp.size == 1) return x;
  return AllGatherSequence::apply(x, tp);
}

at::Tensor reduce_scatter_sequence(const at::Tensor& x, const TensorParallel& tp) {
  if (tp.size == 1) return x;
  return ReduceScatterSequence::apply(x, tp);
}

at::Tensor column_parallel_linear(const at::Tensor& x, const at::Tensor& matrix, const at::Tensor& bias,
                                  const TensorParallel& tp) {
  if (!tp.overlap_communication) return deferrable_linear(gather_column_parallel_input(x, tp), matrix, bias);
  const detail::DeferredWeight deferred = detail::DeferredWeight::of(x, matrix);
  const at::Tensor product = tp.mode == TpMode::ReduceScatter
                                 ? GatherThenProjectOverlapped::apply(x, deferred.operand(), tp, deferred)
                                 : ProjectThenReduceOverlapped::apply(x, deferred.operand(), tp, deferred);
  return bias.defined() ? product + bias : product;
}

at::Tensor replicated_on_sequence_shard(const at::Tensor& parameter, const TensorParallel& tp) {
  if (tp.mode != TpMode::ReduceScatter) return parameter;
  return identity_forward_all_reduce_backward(parameter, tp);
}

at::Tensor vocab_parallel_token_losses(const at::Tensor& scores, const at::Tensor& labels, int64_t vocab_start,
                                       int64_t vocab_size, const TensorParallel& tp) {
  if (scores.dim() != 2 || labels.dim() != 1 || labels.size(0) != scores.size(0))
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "vocab_parallel_token_losses: expected scores [tokens, vocab/tp] and "
                "labels [tokens], got " +
                    std::to_string(scores.dim()) + "-d scores and " + std::to_string(labels.dim()) + "-d labels");
  if (!at::isFloatingType(scores.scalar_type()) || c10::elementSize(scores.scalar_type()) < 4)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "vocab_parallel_token_losses: scores must be float32 or float64 (cast low-precision logits first)");
  return VocabParallelTokenLosses::apply(scores, labels.to(at::kLong), vocab_start, vocab_size, tp);
}

}  // namespace triax
