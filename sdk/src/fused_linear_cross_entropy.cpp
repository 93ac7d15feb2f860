// fused_linear_cross_entropy: see triax/layers/fused_linear_cross_entropy.hpp.
#include "triax/layers/fused_linear_cross_entropy.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <optional>
#include <string>

#include "triax/error.hpp"
#include "triax/layers/fused_ops.hpp"
#include "triax/tensor_text.hpp"

#ifdef TRIAX_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>

#include "triax/kernels/cuda_launch.hpp"
#endif

namespace triax {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// A chunk's logits stay under about this many elements (512 MiB in bf16) unless the caller chooses
// the chunk size: large chunks keep the lm_head's GEMMs efficient, and the fp32 weight-gradient sum
// is read and written once per chunk (at vocabulary 128k, 1 GiB each time).
constexpr int64_t kChunkElements = int64_t{1} << 28;

// Equal chunks of whole GEMM tiles when large.
int64_t default_chunk_tokens(int64_t tokens, int64_t local_vocab) {
  const int64_t most = std::max<int64_t>(kChunkElements / std::max<int64_t>(local_vocab, 1), 1);
  const int64_t chunks = (std::max<int64_t>(tokens, 1) + most - 1) / most;
  const int64_t even = (tokens + chunks - 1) / chunks;
  return even >= 128 ? (even + 63) / 64 * 64 : std::max<int64_t>(even, 1);
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

// The gradients of the loss for an incoming gradient of 1, summed chunk by chunk: those of the
// hidden states and of the weight's real rows, both in fp32 for bf16/fp16 models, so that scaling
// them by the incoming gradient rounds once.
class GradientSum {
 public:
  GradientSum(const at::Tensor& h, const at::Tensor& w)
      : low_precision_(c10::elementSize(w.scalar_type()) < 4), gemm_accumulates_fp32_(low_precision_ && h.is_cuda()) {
    const at::ScalarType sum_type = low_precision_ ? at::kFloat : w.scalar_type();
    hidden_ = at::empty(h.sizes(), h.options().dtype(sum_type));  // every chunk writes its rows
    weight_ = gemm_accumulates_fp32_ ? at::empty(w.sizes(), w.options().dtype(sum_type))
                                     : at::zeros(w.sizes(), w.options().dtype(sum_type));
  }
  // Sums made earlier (in forward), to be scaled.
  static GradientSum made(at::Tensor hidden, at::Tensor weight) {
    GradientSum sums;
    sums.hidden_ = std::move(hidden);
    sums.weight_ = std::move(weight);
    return sums;
  }

  // grad_logits: the gradient of the chunk's logits [n, real]; h_chunk: its rows of hidden.
  void add(int64_t start, const at::Tensor& grad_logits, const at::Tensor& h_chunk, const at::Tensor& w) {
    at::Tensor grad_h_chunk = hidden_.narrow(0, start, grad_logits.size(0));
    // On CUDA the GEMMs write fp32 themselves (out_dtype); the weight's adds to the sum, with beta
    // 0 on the first chunk so that the empty sum is not read. Elsewhere products are converted.
    if (gemm_accumulates_fp32_) {
      at::addmm_out(grad_h_chunk, grad_h_chunk, grad_logits, w, at::kFloat, /*beta=*/0);
      at::addmm_out(weight_, weight_, grad_logits.t(), h_chunk, at::kFloat, /*beta=*/empty_ ? 0 : 1);
    } else if (low_precision_) {
      grad_h_chunk.copy_(at::mm(grad_logits, w));
      weight_.add_(at::mm(grad_logits.t(), h_chunk));
    } else {
      at::mm_out(grad_h_chunk, grad_logits, w);
      weight_.addmm_(grad_logits.t(), h_chunk);
    }
    empty_ = false;
  }

  // The sums times the incoming gradient (0-dim), in the weight's dtype (which hidden shares), the
  // weight's padded rows zero.
  variable_list scaled(const at::Tensor& incoming, const at::Tensor& weight) {
    const c10::ScalarType dtype = weight.scalar_type();
    return {scaled_into(hidden_.scalar_type() == dtype ? hidden_ : at::empty_like(hidden_, dtype), hidden_, incoming),
            scaled_into(weight_.sizes() == weight.sizes() && weight_.scalar_type() == weight.scalar_type()
                            ? weight_
                            : (weight_.size(0) == weight.size(0) ? at::empty_like(weight) : at::zeros_like(weight)),
                        weight_, incoming)};
  }

  const at::Tensor& hidden() const { return hidden_; }
  const at::Tensor& weight() const { return weight_; }

 private:
  GradientSum() = default;

  // out's first rows = sum * incoming, computed in the sum's dtype and rounded once.
  static at::Tensor scaled_into(at::Tensor out, const at::Tensor& sum, const at::Tensor& incoming) {
    at::Tensor rows = out.narrow(0, 0, sum.size(0));
    at::mul_out(rows, sum, incoming);
    return out;
  }

  bool low_precision_ = false, gemm_accumulates_fp32_ = false, empty_ = true;
  at::Tensor hidden_, weight_;
};

// At most one set of gradients computed in forward waits for its backward in a process. An engine
// that runs several forwards before their backwards (AFAB with several micro-batches) would
// otherwise hold every micro-batch's sums (fp32, vocabulary x hidden) at once; the later ones
// compute their logits again in backward instead. The pending set is followed through a weak
// reference to an empty token tensor that only its autograd context holds: the token dies when
// backward takes the sums or the graph is dropped.
class PendingGradients {
 public:
  // A token for a new pending set, or an undefined tensor while another one is pending.
  static at::Tensor claim() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!pending_.expired()) return {};
    at::Tensor token = at::empty({0});
    pending_ = Weak(token.getIntrusivePtr());
    return token;
  }

 private:
  using Weak = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
  static inline std::mutex mutex_;
  static inline Weak pending_{c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>()};
};

struct FusedLinearCrossEntropy : torch::autograd::Function<FusedLinearCrossEntropy> {
  // token_weight: [tokens] in the score dtype, the weight of each token's loss in the result.
  // gradients_now: the caller wants gradients; at tp = 1 each chunk's statistics are complete as
  // soon as its logits are, so its gradients are computed right there, and backward only scales
  // them: one lm_head GEMM per chunk fewer than computing the logits again in backward.
  // with_logsumexp: a second output, each token's logsumexp [tokens] (then gradients_now is false).
  static variable_list forward(AutogradContext* ctx, const at::Tensor& hidden, const at::Tensor& weight,
                               const at::Tensor& labels, const at::Tensor& token_weight, int64_t vocab_start,
                               int64_t vocab_size, int64_t chunk_tokens, const TensorParallel& tp, bool gradients_now,
                               bool with_logsumexp) {
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
    std::optional<GradientSum> gradients;
    at::Tensor pending_token;
    if (gradients_now && tp.size == 1 && real > 0 && (pending_token = PendingGradients::claim()).defined())
      gradients.emplace(h, w);
    if (real > 0) {
      for (int64_t start = 0; start < tokens; start += chunk_tokens) {
        const int64_t n = std::min(chunk_tokens, tokens - start);
        const at::Tensor h_chunk = h.narrow(0, start, n);
        const at::Tensor logits = at::mm(h_chunk, w.t());  // [n, real], model dtype
        const at::Tensor chunk_max = row_max.narrow(0, start, n), chunk_sum = sum_exp.narrow(0, start, n);
        const at::Tensor chunk_label = local_label.narrow(0, start, n);
        chunk_stats(logits, chunk_label, chunk_max, chunk_sum, label_logit.narrow(0, start, n));
        if (gradients)  // at tp = 1 the chunk's max and sum are the global ones
          gradients->add(start,
                         chunk_gradient(logits, chunk_label, chunk_max, chunk_sum, token_weight.narrow(0, start, n)),
                         h_chunk, w);
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

    ctx->saved_data["real"] = real;
    ctx->saved_data["gradients_in_forward"] = gradients.has_value();
    if (gradients) {
      ctx->save_for_backward({weight});
      ctx->saved_data["grad_hidden"] = gradients->hidden();
      ctx->saved_data["grad_weight"] = gradients->weight();
      ctx->saved_data["pending"] = pending_token;
    } else {
      ctx->save_for_backward({weight, h, local_label, global_max, total_exp, token_weight});
      ctx->saved_data["chunk_tokens"] = chunk_tokens;
    }
    at::Tensor loss = (per_token * token_weight).sum();
    if (!with_logsumexp) return {loss};
    return {loss, total_exp.log() + global_max};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& weight = saved[0];
    const int64_t real = ctx->saved_data["real"].toInt();
    if (real == 0) return with_unused({at::zeros_like(saved[1]), at::zeros_like(weight)});  // only padding here
#ifdef TRIAX_WITH_CUDA
    c10::cuda::OptionalCUDAGuard device;
    if (weight.is_cuda()) device.set_device(weight.device());
#endif
    const at::Tensor& incoming = grads[0];                   // 0-dim, the loss's dtype
    const at::Tensor lse_grad = grads.size() > 1 ? grads[1] : at::Tensor();
    if (ctx->saved_data["gradients_in_forward"].toBool()) {  // let go of them once used
      if (!ctx->saved_data.count("grad_hidden"))
        throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                    "fused_linear_cross_entropy: a second backward through the same loss (retain_graph); its "
                    "gradients were computed in forward and handed over by the first");
      GradientSum gradients =
          GradientSum::made(ctx->saved_data["grad_hidden"].toTensor(), ctx->saved_data["grad_weight"].toTensor());
      for (const char* key : {"grad_hidden", "grad_weight", "pending"}) ctx->saved_data.erase(key);
      return with_unused(gradients.scaled(incoming, weight));
    }
    const at::Tensor &h = saved[1], &local_label = saved[2];
    const at::Tensor &row_max = saved[3], &sum_exp = saved[4], &token_weight = saved[5];
    const int64_t chunk_tokens = ctx->saved_data["chunk_tokens"].toInt();
    const at::Tensor w = weight.narrow(0, 0, real).contiguous();
    // With a logsumexp gradient g: d lse / d z = softmax, so each row's gradient is
    // softmax x (weight x incoming + g) - one_hot x weight x incoming, scaled by 1 at the end.
    const bool with_lse = lse_grad.defined();
    const at::Tensor scale = with_lse ? token_weight * (incoming.defined() ? incoming : at::zeros({}, token_weight.options())) +
                                            lse_grad.to(token_weight.scalar_type())
                                      : token_weight;
    GradientSum gradients(h, w);
    for (int64_t start = 0; start < h.size(0); start += chunk_tokens) {
      const int64_t n = std::min(chunk_tokens, h.size(0) - start);
      const at::Tensor h_chunk = h.narrow(0, start, n);
      const at::Tensor chunk_label = local_label.narrow(0, start, n);
      at::Tensor grad = chunk_gradient(at::mm(h_chunk, w.t()), chunk_label, row_max.narrow(0, start, n),
                                       sum_exp.narrow(0, start, n), scale.narrow(0, start, n));
      if (with_lse) {  // chunk_gradient took one_hot x scale; one_hot x weight x incoming is wanted
        const at::Tensor here = chunk_label.ge(0).to(grad.scalar_type());
        grad.scatter_add_(1, chunk_label.clamp_min(0).unsqueeze(1),
                          (lse_grad.narrow(0, start, n).to(grad.scalar_type()) * here).unsqueeze(1));
      }
      gradients.add(start, grad, h_chunk, w);
    }
    return with_unused(gradients.scaled(with_lse ? at::ones({}, scale.options()) : incoming, weight));
  }

  // {grad_hidden, grad_weight} and no gradient for the other arguments of forward.
  static variable_list with_unused(variable_list gradients) {
    gradients.resize(10);
    return gradients;
  }
};

void require_argument(bool condition, const std::string& message) {
  if (!condition) throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "fused_linear_cross_entropy: " + message);
}

}  // namespace

namespace {

variable_list fused_loss(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels,
                         const at::Tensor& mask, int64_t vocab_start, int64_t vocab_size, const TensorParallel& tp,
                         int64_t chunk_tokens, bool with_logsumexp) {
  require_argument(tp.size >= 1 && tp.rank >= 0 && tp.rank < tp.size && (tp.size == 1 || tp.host.valid()),
                   "tensor parallel rank " + std::to_string(tp.rank) + " of " + std::to_string(tp.size) +
                       " needs a valid group (and the host's communicator when tp > 1)");
  require_argument(hidden.dim() == 2, "hidden must be [tokens, hidden], got " + shape_text(hidden.sizes()));
  require_argument(weight.dim() == 2 && weight.size(1) == hidden.size(1),
                   "weight " + shape_text(weight.sizes()) +
                       " must be [vocab / tp, hidden] with hidden = " + std::to_string(hidden.size(1)));
  require_argument(weight.scalar_type() == hidden.scalar_type() && at::isFloatingType(hidden.scalar_type()),
                   std::string("hidden (") + c10::toString(hidden.scalar_type()) + ") and weight (" +
                       c10::toString(weight.scalar_type()) + ") must share one floating dtype");
  require_argument(
      labels.dim() == 1 && labels.size(0) == hidden.size(0),
      "labels " + shape_text(labels.sizes()) + " must be [tokens] with tokens = " + std::to_string(hidden.size(0)));
  require_argument(!mask.defined() || mask.numel() == hidden.size(0),
                   "mask " + (mask.defined() ? shape_text(mask.sizes()) : std::string()) +
                       " must hold one value per token (" + std::to_string(hidden.size(0)) + ")");
  require_argument(vocab_size >= 1 && vocab_start >= 0, "vocab_size (" + std::to_string(vocab_size) +
                                                            ") must be positive and vocab_start (" +
                                                            std::to_string(vocab_start) + ") not negative");
  require_argument(chunk_tokens >= 0,
                   "chunk_tokens must be 0 (automatic) or positive, got " + std::to_string(chunk_tokens));

  const int64_t tokens = hidden.size(0);
  const at::TensorOptions score = hidden.options().dtype(at::promote_types(hidden.scalar_type(), at::kFloat));
  at::Tensor token_weight;
  if (mask.defined()) {
    const at::Tensor m = mask.reshape({-1}).to(score);
    token_weight = m / m.sum().clamp_min(1.0);
  } else {
    token_weight = at::full({tokens}, 1.0 / static_cast<double>(std::max<int64_t>(tokens, 1)), score);
  }
  const int64_t chunk = chunk_tokens > 0 ? chunk_tokens : default_chunk_tokens(tokens, weight.size(0));
  // With the logsumexp its gradient is known only in backward, which then computes the logits again.
  const bool gradients_now =
      !with_logsumexp && at::GradMode::is_enabled() && (hidden.requires_grad() || weight.requires_grad());
  return FusedLinearCrossEntropy::apply(hidden, weight, labels.to(at::kLong), token_weight.detach(), vocab_start,
                                        vocab_size, chunk, tp, gradients_now, with_logsumexp);
}

}  // namespace

at::Tensor fused_linear_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels,
                                      const at::Tensor& mask, int64_t vocab_start, int64_t vocab_size,
                                      const TensorParallel& tp, int64_t chunk_tokens) {
  return fused_loss(hidden, weight, labels, mask, vocab_start, vocab_size, tp, chunk_tokens, false)[0];
}

LossAndLogsumexp fused_linear_cross_entropy_with_logsumexp(const at::Tensor& hidden, const at::Tensor& weight,
                                                           const at::Tensor& labels, const at::Tensor& mask,
                                                           int64_t vocab_start, int64_t vocab_size,
                                                           const TensorParallel& tp, int64_t chunk_tokens) {
  const variable_list out = fused_loss(hidden, weight, labels, mask, vocab_start, vocab_size, tp, chunk_tokens, true);
  return {out[0], out[1]};
}

}  // namespace triax
