// fused_linear_cross_entropy: see triax/layers/fused_linear_cross_entropy.hpp.
#include "triax/layers/fused_linear_cross_entropy.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <limits>
#include <string>

#include "triax/error.hpp"
#include "triax/layers/fused_ops.hpp"
#include "triax/tensor_text.hpp"

#ifdef TRIAX_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>

#include "cuda_launch.hpp"
#endif

namespace triax {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// A chunk's logits stay under this many elements unless the caller chooses the chunk size.
constexpr int64_t kChunkElements = int64_t{1} << 26;

int64_t default_chunk_tokens(int64_t local_vocab) {
  const int64_t tokens = kChunkElements / std::max<int64_t>(local_vocab, 1);
  return tokens >= 128 ? tokens / 64 * 64 : std::max<int64_t>(tokens, 1);  // whole GEMM tiles when large
}

#ifdef TRIAX_WITH_CUDA
bool use_kernels(const at::Tensor& logits) {
  return fused_kernels_enabled() && logits.is_cuda() && cuda_launch::kernel_dtype(logits.scalar_type()).has_value();
}
#endif

// Per row of one chunk's logits [rows, cols] (cols >= 1): the max, the sum of exp(z - max) and the
// label's logit (0 where local_label < 0), written into the chunk's slices of the stats.
void chunk_stats(const at::Tensor& logits, const at::Tensor& local_label, at::Tensor row_max, at::Tensor sum_exp,
                 at::Tensor label_logit) {
#ifdef TRIAX_WITH_CUDA
  if (use_kernels(logits)) {
    cuda_launch::check(
        kernels::cross_entropy_stats(
            *cuda_launch::kernel_dtype(logits.scalar_type()), logits.const_data_ptr(), logits.size(0), logits.size(1),
            logits.stride(0), local_label.const_data_ptr<int64_t>(), row_max.mutable_data_ptr<float>(),
            sum_exp.mutable_data_ptr<float>(), label_logit.mutable_data_ptr<float>(), cuda_launch::stream_of(logits)),
        "cross_entropy_stats");
    return;
  }
#endif
  const at::Tensor z = logits.to(row_max.scalar_type());
  const at::Tensor m = std::get<0>(z.max(1));
  row_max.copy_(m);
  sum_exp.copy_((z - m.unsqueeze(1)).exp().sum(1));
  const at::Tensor here = local_label.ge(0);
  const at::Tensor label_z = z.gather(1, local_label.clamp_min(0).unsqueeze(1)).squeeze(1);
  label_logit.copy_(at::where(here, label_z, at::zeros({}, z.options())));
}

// The gradient of the loss with respect to one chunk's logits, in the logits' dtype:
// (exp(z - row_max) / sum_exp - one_hot(local_label)) * scale per row. May overwrite `logits`.
at::Tensor chunk_gradient(at::Tensor logits, const at::Tensor& local_label, const at::Tensor& row_max,
                          const at::Tensor& sum_exp, const at::Tensor& scale) {
#ifdef TRIAX_WITH_CUDA
  if (use_kernels(logits)) {
    cuda_launch::check(kernels::cross_entropy_gradient(*cuda_launch::kernel_dtype(logits.scalar_type()),
                                                       logits.mutable_data_ptr(), logits.size(0), logits.size(1),
                                                       logits.stride(0), local_label.const_data_ptr<int64_t>(),
                                                       row_max.const_data_ptr<float>(), sum_exp.const_data_ptr<float>(),
                                                       scale.const_data_ptr<float>(), cuda_launch::stream_of(logits)),
                       "cross_entropy_gradient");
    return logits;
  }
#endif
  at::Tensor p = (logits.to(row_max.scalar_type()) - row_max.unsqueeze(1)).exp_().div_(sum_exp.unsqueeze(1));
  const at::Tensor here = local_label.ge(0).to(p.scalar_type()).unsqueeze(1);
  p.scatter_add_(1, local_label.clamp_min(0).unsqueeze(1), here.neg());
  return p.mul_(scale.unsqueeze(1)).to(logits.scalar_type());
}

struct FusedLinearCrossEntropy : torch::autograd::Function<FusedLinearCrossEntropy> {
  // token_weight: [tokens] in the score dtype, the weight of each token's loss in the result.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& hidden, const at::Tensor& weight,
                            const at::Tensor& labels, const at::Tensor& token_weight, int64_t vocab_start,
                            int64_t vocab_size, int64_t chunk_tokens, const TensorParallel& tp) {
#ifdef TRIAX_WITH_CUDA
    c10::cuda::OptionalCUDAGuard device;  // the kernels launch on the tensors' device
    if (hidden.is_cuda()) device.set_device(hidden.device());
#endif
    const int64_t tokens = hidden.size(0), local_vocab = weight.size(0);
    const int64_t real = std::clamp<int64_t>(vocab_size - vocab_start, 0, local_vocab);
    const at::Tensor h = hidden.contiguous();
    const at::Tensor w = weight.narrow(0, 0, real).contiguous();
    const at::TensorOptions score = token_weight.options();

    // This rank's column of each label, or -1 where another rank (or no rank) holds it.
    const at::Tensor here = labels.ge(vocab_start).logical_and(labels.lt(vocab_start + real));
    const at::Tensor local_label = at::where(here, labels - vocab_start, at::full({}, -1, labels.options()));

    at::Tensor row_max = at::full({tokens}, -std::numeric_limits<double>::infinity(), score);
    at::Tensor sum_exp = at::zeros({tokens}, score);
    at::Tensor label_logit = at::zeros({tokens}, score);
    if (real > 0) {
      for (int64_t start = 0; start < tokens; start += chunk_tokens) {
        const int64_t n = std::min(chunk_tokens, tokens - start);
        const at::Tensor logits = at::mm(h.narrow(0, start, n), w.t());  // [n, real], model dtype
        chunk_stats(logits, local_label.narrow(0, start, n), row_max.narrow(0, start, n), sum_exp.narrow(0, start, n),
                    label_logit.narrow(0, start, n));
      }
    }

    // One all-reduce of the max, then one of [sum of exp(z - global max), label score].
    at::Tensor global_max = row_max.clone();
    if (tp.size > 1) tp.host.all_reduce(TRIAX_GROUP_TP, global_max, TRIAX_REDUCE_MAX);
    at::Tensor sums = at::stack(
        {sum_exp * (row_max - global_max).exp(), at::where(here, label_logit - global_max, at::zeros({}, score))});
    if (tp.size > 1) tp.host.all_reduce(TRIAX_GROUP_TP, sums, TRIAX_REDUCE_SUM);
    const at::Tensor total_exp = sums.select(0, 0).contiguous();
    const at::Tensor per_token = total_exp.log() - sums.select(0, 1);

    ctx->save_for_backward({h, weight, local_label, global_max, total_exp, token_weight});
    ctx->saved_data["chunk_tokens"] = chunk_tokens;
    ctx->saved_data["real"] = real;
    return (per_token * token_weight).sum();
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &h = saved[0], &weight = saved[1], &local_label = saved[2];
    const at::Tensor &row_max = saved[3], &sum_exp = saved[4], &token_weight = saved[5];
    const int64_t chunk_tokens = ctx->saved_data["chunk_tokens"].toInt();
    const int64_t real = ctx->saved_data["real"].toInt();
#ifdef TRIAX_WITH_CUDA
    c10::cuda::OptionalCUDAGuard device;
    if (h.is_cuda()) device.set_device(h.device());
#endif
    const int64_t tokens = h.size(0);
    const at::Tensor scale = (token_weight * grads[0].to(token_weight.scalar_type())).contiguous();
    if (real == 0) return {at::zeros_like(h), at::zeros_like(weight), {}, {}, {}, {}, {}, {}};
    at::Tensor grad_hidden = at::empty_like(h);  // every chunk writes its rows

    const at::Tensor w = weight.narrow(0, 0, real).contiguous();
    // bf16/fp16 weights: the per-chunk products are summed in fp32. On CUDA the GEMM adds its fp32
    // result to the sum itself (out_dtype); elsewhere each chunk's product is added to it.
    const bool low_precision = c10::elementSize(weight.scalar_type()) < 4;
    const bool gemm_accumulates_fp32 = low_precision && h.is_cuda();
    const at::TensorOptions grad_w_options = w.options().dtype(low_precision ? at::kFloat : w.scalar_type());
    at::Tensor grad_w = gemm_accumulates_fp32 ? at::empty({real, weight.size(1)}, grad_w_options)
                                              : at::zeros({real, weight.size(1)}, grad_w_options);
    for (int64_t start = 0; start < tokens; start += chunk_tokens) {
      const int64_t n = std::min(chunk_tokens, tokens - start);
      const at::Tensor h_chunk = h.narrow(0, start, n);
      const at::Tensor grad_logits =
          chunk_gradient(at::mm(h_chunk, w.t()), local_label.narrow(0, start, n), row_max.narrow(0, start, n),
                         sum_exp.narrow(0, start, n), scale.narrow(0, start, n));
      at::Tensor grad_h_chunk = grad_hidden.narrow(0, start, n);
      at::mm_out(grad_h_chunk, grad_logits, w);
      if (gemm_accumulates_fp32)  // beta 0 on the first chunk: the empty sum is not read
        at::addmm_out(grad_w, grad_w, grad_logits.t(), h_chunk, at::kFloat, /*beta=*/start == 0 ? 0 : 1);
      else if (low_precision)
        grad_w.add_(at::mm(grad_logits.t(), h_chunk));
      else
        grad_w.addmm_(grad_logits.t(), h_chunk);
    }
    at::Tensor grad_weight;
    if (real == weight.size(0)) {
      grad_weight = grad_w.to(weight.scalar_type());
    } else {  // padded rows take no gradient
      grad_weight = at::zeros_like(weight);
      grad_weight.narrow(0, 0, real).copy_(grad_w);
    }
    return {grad_hidden, grad_weight, {}, {}, {}, {}, {}, {}};
  }
};

void require(bool condition, const std::string& message) {
  if (!condition) throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "fused_linear_cross_entropy: " + message);
}

}  // namespace

at::Tensor fused_linear_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels,
                                      const at::Tensor& mask, int64_t vocab_start, int64_t vocab_size,
                                      const TensorParallel& tp, int64_t chunk_tokens) {
  require(tp.size >= 1 && tp.rank >= 0 && tp.rank < tp.size && (tp.size == 1 || tp.host.valid()),
          "tensor parallel rank " + std::to_string(tp.rank) + " of " + std::to_string(tp.size) +
              " needs a valid group (and the host's communicator when tp > 1)");
  require(hidden.dim() == 2, "hidden must be [tokens, hidden], got " + shape_text(hidden.sizes()));
  require(weight.dim() == 2 && weight.size(1) == hidden.size(1),
          "weight " + shape_text(weight.sizes()) +
              " must be [vocab / tp, hidden] with hidden = " + std::to_string(hidden.size(1)));
  require(weight.scalar_type() == hidden.scalar_type() && at::isFloatingType(hidden.scalar_type()),
          std::string("hidden (") + c10::toString(hidden.scalar_type()) + ") and weight (" +
              c10::toString(weight.scalar_type()) + ") must share one floating dtype");
  require(labels.dim() == 1 && labels.size(0) == hidden.size(0),
          "labels " + shape_text(labels.sizes()) + " must be [tokens] with tokens = " + std::to_string(hidden.size(0)));
  require(!mask.defined() || mask.numel() == hidden.size(0),
          "mask " + (mask.defined() ? shape_text(mask.sizes()) : std::string()) + " must hold one value per token (" +
              std::to_string(hidden.size(0)) + ")");
  require(vocab_size >= 1 && vocab_start >= 0, "vocab_size (" + std::to_string(vocab_size) +
                                                   ") must be positive and vocab_start (" +
                                                   std::to_string(vocab_start) + ") not negative");
  require(chunk_tokens >= 0, "chunk_tokens must be 0 (automatic) or positive, got " + std::to_string(chunk_tokens));

  const int64_t tokens = hidden.size(0);
  const at::TensorOptions score = hidden.options().dtype(at::promote_types(hidden.scalar_type(), at::kFloat));
  at::Tensor token_weight;
  if (mask.defined()) {
    const at::Tensor m = mask.reshape({-1}).to(score);
    token_weight = m / m.sum().clamp_min(1.0);
  } else {
    token_weight = at::full({tokens}, 1.0 / static_cast<double>(std::max<int64_t>(tokens, 1)), score);
  }
  const int64_t chunk = chunk_tokens > 0 ? chunk_tokens : default_chunk_tokens(weight.size(0));
  return FusedLinearCrossEntropy::apply(hidden, weight, labels.to(at::kLong), token_weight.detach(), vocab_start,
                                        vocab_size, chunk, tp);
}

}  // namespace triax
