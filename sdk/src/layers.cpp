// The SDK's parallel building blocks. In this release every tensor-parallel group has size 1
// (the core runs one process); the layers already carry their shard metadata so that
// checkpoints and the optimizer see global shapes.
#include <ATen/ATen.h>

#include "triax/error.hpp"
#include "triax/layers/cross_entropy.hpp"
#include "triax/layers/embedding.hpp"
#include "triax/layers/linear.hpp"
#include "triax/layers/norm.hpp"

namespace triax {
namespace {

at::TensorOptions options_for(c10::Device device, c10::ScalarType dtype) {
  return at::TensorOptions().device(device).dtype(dtype);
}

void require_single_rank(const TensorParallel& tp, const char* layer) {
  if (tp.size != 1)
    throw Error(TRIAX_ERROR_UNSUPPORTED, std::string(layer) + ": tensor parallel size " + std::to_string(tp.size) +
                                             " needs a multi-process communicator");
}

}  // namespace

int64_t TensorParallel::shard_size(int64_t total, const char* what) const {
  if (total % size != 0)
    throw Error(TRIAX_ERROR_INVALID_CONFIG, std::string(what) + " (" + std::to_string(total) +
                                                ") is not divisible by the tensor parallel size " +
                                                std::to_string(size));
  return total / size;
}

ColumnParallelLinear::ColumnParallelLinear(const LinearOptions& o, const TensorParallel& tp) : tp_(tp) {
  require_single_rank(tp, "ColumnParallelLinear");
  int64_t local_out = tp.shard_size(o.out_features, "output features");
  auto opts = options_for(o.device, o.dtype);
  weight = register_parameter_with_spec(
      "weight", at::empty({local_out, o.in_features}, opts),
      ParameterSpec::sharded({o.out_features, o.in_features}, 0, tp.shard_offset(o.out_features)));
  if (o.bias)
    bias = register_parameter_with_spec(
        "bias", at::zeros({local_out}, opts),
        ParameterSpec::sharded({o.out_features}, 0, tp.shard_offset(o.out_features), TRIAX_PARAM_NO_WEIGHT_DECAY));
}

at::Tensor ColumnParallelLinear::forward(const at::Tensor& x) { return at::linear(x, weight, bias); }

RowParallelLinear::RowParallelLinear(const LinearOptions& o, const TensorParallel& tp) : tp_(tp) {
  require_single_rank(tp, "RowParallelLinear");
  int64_t local_in = tp.shard_size(o.in_features, "input features");
  auto opts = options_for(o.device, o.dtype);
  weight = register_parameter_with_spec(
      "weight", at::empty({o.out_features, local_in}, opts),
      ParameterSpec::sharded({o.out_features, o.in_features}, 1, tp.shard_offset(o.in_features)));
  if (o.bias)
    bias = register_parameter_with_spec(
        "bias", at::zeros({o.out_features}, opts),
        ParameterSpec::replicated(at::zeros({o.out_features}), TRIAX_PARAM_NO_WEIGHT_DECAY));
}

at::Tensor RowParallelLinear::forward(const at::Tensor& x) { return at::linear(x, weight, bias); }

VocabParallelEmbedding::VocabParallelEmbedding(int64_t padded_vocab_size, int64_t hidden_size, c10::Device device,
                                               c10::ScalarType dtype, const TensorParallel& tp)
    : tp_(tp) {
  require_single_rank(tp, "VocabParallelEmbedding");
  int64_t local_vocab = tp.shard_size(padded_vocab_size, "padded vocabulary size");
  vocab_start_ = tp.shard_offset(padded_vocab_size);
  weight = register_parameter_with_spec("weight", at::empty({local_vocab, hidden_size}, options_for(device, dtype)),
                                        ParameterSpec::sharded({padded_vocab_size, hidden_size}, 0, vocab_start_));
}

at::Tensor VocabParallelEmbedding::forward(const at::Tensor& ids) { return at::embedding(weight, ids); }

RMSNorm::RMSNorm(int64_t hidden_size, double eps, c10::Device device, c10::ScalarType dtype) : eps_(eps) {
  at::Tensor ones = at::ones({hidden_size}, options_for(device, dtype));
  weight = register_parameter_with_spec("weight", ones, ParameterSpec::replicated(ones));
}

at::Tensor RMSNorm::forward(const at::Tensor& x) {
  // fp32 for fp32/bf16/fp16 inputs; fp64 inputs stay fp64 (exact gradient checks).
  at::Tensor x32 = x.to(at::promote_types(x.scalar_type(), at::kFloat));
  at::Tensor normed = x32 * at::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return normed.to(x.scalar_type()) * weight;
}

at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits, const at::Tensor& labels, const at::Tensor& mask,
                                        int64_t vocab_start, int64_t vocab_size, const TensorParallel& tp) {
  require_single_rank(tp, "vocab_parallel_cross_entropy");
  at::Tensor scores = logits.to(at::promote_types(logits.scalar_type(), at::kFloat));  // fp64 stays fp64
  int64_t local = scores.size(-1);
  if (vocab_start + local > vocab_size) {
    // Padded vocabulary columns must never take probability mass.
    int64_t real = std::max<int64_t>(0, vocab_size - vocab_start);
    scores = at::cat({scores.narrow(-1, 0, real), at::full({scores.size(0), local - real},
                                                           -std::numeric_limits<float>::infinity(), scores.options())},
                     -1);
  }
  at::Tensor per_token = at::cross_entropy_loss(scores, labels, {}, at::Reduction::None);
  if (!mask.defined()) return per_token.mean();
  at::Tensor m = mask.to(scores.scalar_type());
  return (per_token * m).sum() / m.sum().clamp_min(1.0);
}

}  // namespace triax
