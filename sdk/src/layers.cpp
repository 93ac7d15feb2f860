// The SDK's parallel layers: shard metadata at construction, the tensor-parallel collectives
// (triax/layers/tensor_parallel_ops.hpp) in forward.
#include <ATen/ATen.h>

#include "triax/error.hpp"
#include "triax/layers/channel_major_linear.hpp"
#include "triax/layers/cross_entropy.hpp"
#include "triax/layers/decode_gemv.hpp"
#include "triax/layers/decode_norm_gemv.hpp"
#include "triax/layers/deferred_weight_gradients.hpp"
#include "triax/layers/embedding.hpp"
#include "triax/layers/fused_ops.hpp"
#include "triax/layers/linear.hpp"
#include "triax/layers/norm.hpp"
#include "triax/layers/tensor_parallel_ops.hpp"

namespace triax {
namespace {

at::TensorOptions options_for(c10::Device device, c10::ScalarType dtype) {
  return at::TensorOptions().device(device).dtype(dtype);
}

void require_group(const TensorParallel& tp, const char* layer) {
  if (tp.size < 1 || tp.rank < 0 || tp.rank >= tp.size)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, std::string(layer) + ": tensor parallel rank " + std::to_string(tp.rank) +
                                                  " is outside a group of size " + std::to_string(tp.size));
  if (tp.size > 1 && !tp.host.valid())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, std::string(layer) + ": tensor parallel size " + std::to_string(tp.size) +
                                                  " needs the host's communicator (ModelContext::host)");
}

}  // namespace

int64_t TensorParallel::shard_size(int64_t total, const char* what) const {
  if (total % size != 0)
    throw Error(TRIAX_ERROR_INVALID_CONFIG, std::string(what) + " (" + std::to_string(total) +
                                                ") is not divisible by the tensor parallel size " +
                                                std::to_string(size));
  return total / size;
}

ColumnParallelLinear::ColumnParallelLinear(const LinearOptions& o, const TensorParallel& tp)
    : tp_(tp), input_major_(o.input_major), keeps_model_dtype_(o.keeps_model_dtype) {
  require_group(tp, "ColumnParallelLinear");
  if (o.parts < 1) throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "ColumnParallelLinear: parts must be at least 1");
  if (o.groups != 0) {
    init_grouped(o, tp);
    return;
  }
  const int64_t local_out = tp.shard_size(o.out_features, "output features");
  const int64_t offset = tp.shard_offset(o.out_features);
  // The output features' dimension: after the parts' (when fused), before or after the inputs'.
  std::vector<int64_t> outputs = {o.out_features};
  if (o.parts > 1) outputs.insert(outputs.begin(), o.parts);
  std::vector<int64_t> shape = outputs;
  shape.insert(o.input_major ? shape.begin() : shape.end(), o.in_features);
  const int64_t dim = o.input_major ? static_cast<int64_t>(shape.size()) - 1 : static_cast<int64_t>(outputs.size()) - 1;
  std::vector<int64_t> local = shape;
  local[static_cast<size_t>(dim)] = local_out;
  auto opts = options_for(o.device, o.dtype);
  // A muP matrix is [.., fan_out, fan_in] (fused parts: out_features wide each); the input-major
  // (Conv1D) layout is not one.
  const ParameterRole role = o.input_major ? ParameterRole::Undeclared
                             : o.parts > 1 ? ParameterRole::FusedMatrix
                                           : ParameterRole::Matrix;
  ParameterSpec spec = ParameterSpec::sharded(shape, dim, offset, 0, role);
  if (role == ParameterRole::FusedMatrix) spec.part_fan_out = o.out_features;
  weight = register_parameter_with_spec("weight", at::empty(local, opts), spec);
  if (o.bias) {
    std::vector<int64_t> local_bias = outputs;
    local_bias.back() = local_out;
    bias = register_parameter_with_spec("bias", at::zeros(local_bias, opts),
                                        ParameterSpec::sharded(outputs, static_cast<int64_t>(outputs.size()) - 1,
                                                               offset, TRIAX_PARAM_NO_WEIGHT_DECAY, ParameterRole::Vector));
  }
}

void ColumnParallelLinear::init_grouped(const LinearOptions& o, const TensorParallel& tp) {
  if (o.groups < 0 || o.parts != 1 || o.input_major)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "ColumnParallelLinear: groups must be positive, in the [out, in] layout without fused parts");
  if (o.widest_part < 1 || o.widest_part > o.out_features)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "ColumnParallelLinear: the widest part of a group (" +
                                                  std::to_string(o.widest_part) + ") must be in [1, " +
                                                  std::to_string(o.out_features) + "]");
  const int64_t local_groups = tp.shard_size(o.groups, "groups of output features");
  const int64_t offset = tp.shard_offset(o.groups);
  auto opts = options_for(o.device, o.dtype);
  ParameterSpec spec =
      ParameterSpec::sharded({o.groups, o.out_features, o.in_features}, 0, offset, 0, ParameterRole::FusedMatrix);
  spec.part_fan_out = o.groups * o.widest_part;
  weight = register_parameter_with_spec("weight", at::empty({local_groups, o.out_features, o.in_features}, opts), spec);
  if (o.bias)
    bias = register_parameter_with_spec(
        "bias", at::zeros({local_groups, o.out_features}, opts),
        ParameterSpec::sharded({o.groups, o.out_features}, 0, offset, TRIAX_PARAM_NO_WEIGHT_DECAY,
                               ParameterRole::Vector));
}

at::Tensor gather_column_parallel_input(const at::Tensor& x, const TensorParallel& tp) {
  return tp.mode == TpMode::ReduceScatter ? all_gather_sequence(x, tp) : identity_forward_all_reduce_backward(x, tp);
}

at::Tensor ColumnParallelLinear::forward(const at::Tensor& x) {
  if (fp8_) return forward_gathered(gather_column_parallel_input(x, tp_));  // no overlapped variant in fp8
  return column_parallel_linear(x, matrix(), bias.defined() ? bias.reshape({-1}) : at::Tensor(), tp_);
}

at::Tensor ColumnParallelLinear::forward_gathered(const at::Tensor& x) {
  if (fp8_) {
    const at::Tensor product = fp8_linear(x, matrix(), *fp8_);
    return bias.defined() ? product + bias.reshape({-1}) : product;
  }
  return deferrable_linear(x, matrix(), bias.defined() ? bias.reshape({-1}) : at::Tensor());
}

at::Tensor ColumnParallelLinear::forward_swiglu_at_decode(const at::Tensor& x) {
  const at::Tensor m = matrix_at_decode();
  return m.defined() ? decode_gate_up_swiglu(x, m) : at::Tensor();
}

at::Tensor ColumnParallelLinear::matrix_at_decode() const {
  // Inference only (training keeps its path untouched): without autograd, ALL_REDUCE's gathered
  // input is x itself.
  if (at::GradMode::is_enabled() || fp8_ || bias.defined() || tp_.overlap_communication ||
      tp_.mode == TpMode::ReduceScatter)
    return {};
  return matrix();
}

at::Tensor ColumnParallelLinear::matrix() const {
  if (weight.dim() == 2 && !input_major_) return weight;
  // As one [out', in] matrix: the fused parts' rows one after the other.
  const int64_t in = input_major_ ? weight.size(0) : weight.size(-1);
  return input_major_ ? weight.reshape({in, -1}).t() : weight.reshape({-1, in});
}

RowParallelLinear::RowParallelLinear(const LinearOptions& o, const TensorParallel& tp)
    : tp_(tp), input_major_(o.input_major) {
  require_group(tp, "RowParallelLinear");
  if (o.parts != 1) throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "RowParallelLinear: fused parts are column-parallel only");
  int64_t local_in = tp.shard_size(o.in_features, "input features");
  auto opts = options_for(o.device, o.dtype);
  const int64_t offset = tp.shard_offset(o.in_features);
  weight = o.input_major
               ? register_parameter_with_spec("weight", at::empty({local_in, o.out_features}, opts),
                                              ParameterSpec::sharded({o.in_features, o.out_features}, 0, offset))
               : register_parameter_with_spec("weight", at::empty({o.out_features, local_in}, opts),
                                              ParameterSpec::sharded({o.out_features, o.in_features}, 1, offset, 0,
                                                                     ParameterRole::Matrix));
  if (o.bias)
    bias = register_parameter_with_spec(
        "bias", at::zeros({o.out_features}, opts),
        ParameterSpec::replicated(at::zeros({o.out_features}), TRIAX_PARAM_NO_WEIGHT_DECAY, ParameterRole::Vector));
}

at::Tensor RowParallelLinear::forward(const at::Tensor& x) {
  return reduce(fp8_ ? fp8_linear(x, matrix(), *fp8_) : deferrable_linear(x, matrix()));
}

at::Tensor RowParallelLinear::forward_channel_major(const at::Tensor& x) {
  if (fp8_) return forward(x.transpose(1, 2));
  return reduce(channel_major_linear(x, matrix()));
}

at::Tensor RowParallelLinear::forward_activated(RecomputedActivation activation, const at::Tensor& x,
                                                bool recompute) {
  // A tensorwise fp8 product takes SwiGLU's amax from its kernel, and so does the fp8 product
  // before it (gate_up's, whose output gradient SwiGLU's backward writes).
  if (fp8_ && fp8_->recipe == Fp8Recipe::Tensorwise && activation == RecomputedActivation::SwigluHalves)
    return forward(swiglu_halves(x, AmaxRecording::OutputAndInputGradient));
  if (!recompute || fp8_) return forward(apply_activation(activation, x));
  return reduce(linear_of_recomputed_activation(activation, x, matrix()));
}

at::Tensor RowParallelLinear::matrix() const { return input_major_ ? weight.t() : weight; }

at::Tensor RowParallelLinear::reduce(const at::Tensor& partial) const {
  at::Tensor reduced = tp_.mode == TpMode::ReduceScatter ? reduce_scatter_sequence(partial, tp_)
                                                         : all_reduce_forward_identity_backward(partial, tp_);
  return bias.defined() ? reduced + replicated_on_sequence_shard(bias, tp_) : reduced;
}

VocabParallelEmbedding::VocabParallelEmbedding(int64_t padded_vocab_size, int64_t hidden_size, c10::Device device,
                                               c10::ScalarType dtype, const TensorParallel& tp)
    : tp_(tp) {
  require_group(tp, "VocabParallelEmbedding");
  int64_t local_vocab = tp.shard_size(padded_vocab_size, "padded vocabulary size");
  vocab_start_ = tp.shard_offset(padded_vocab_size);
  weight = register_parameter_with_spec("weight", at::empty({local_vocab, hidden_size}, options_for(device, dtype)),
                                        ParameterSpec::sharded({padded_vocab_size, hidden_size}, 0, vocab_start_, 0,
                                                               ParameterRole::Embedding));
}

at::Tensor VocabParallelEmbedding::forward(const at::Tensor& ids) {
  if (tp_.size == 1) return at::embedding(weight, ids);
  const int64_t local_vocab = weight.size(0);
  at::Tensor outside = ids.lt(vocab_start_).logical_or(ids.ge(vocab_start_ + local_vocab));
  at::Tensor local_ids = (ids - vocab_start_).masked_fill(outside, 0);
  at::Tensor partial = at::embedding(weight, local_ids).masked_fill(outside.unsqueeze(-1), 0.0);
  return tp_.mode == TpMode::ReduceScatter ? reduce_scatter_sequence(partial, tp_)
                                           : all_reduce_forward_identity_backward(partial, tp_);
}

RMSNorm::RMSNorm(int64_t hidden_size, double eps, c10::Device device, c10::ScalarType dtype, const TensorParallel& tp)
    : eps_(eps), tp_(tp) {
  require_group(tp, "RMSNorm");
  at::Tensor ones = at::ones({hidden_size}, options_for(device, dtype));
  weight = register_parameter_with_spec("weight", ones, ParameterSpec::replicated(ones, 0, ParameterRole::Vector));
}

at::Tensor RMSNorm::forward(const at::Tensor& x) {
  return rms_norm(x, replicated_on_sequence_shard(weight, tp_), eps_, amax_recording_);
}

std::pair<at::Tensor, at::Tensor> RMSNorm::forward_after_add(const at::Tensor& x, const at::Tensor& y) {
  return add_rms_norm(x, y, replicated_on_sequence_shard(weight, tp_), eps_, amax_recording_);
}

std::pair<at::Tensor, at::Tensor> RMSNorm::forward_of_stream(const ResidualStream& stream) {
  if (stream.pending.defined()) return forward_after_add(stream.residual, stream.pending);
  return {stream.residual, forward(stream.residual)};
}

NormedProduct RMSNorm::forward_of_stream_times(const ResidualStream& stream, const at::Tensor& matrix,
                                               DecodeProduct kind) {
  if (amax_recording_ != AmaxRecording::None) return {};
  return decode_norm_gemv(stream, replicated_on_sequence_shard(weight, tp_), eps_, matrix, kind);
}

LayerNorm::LayerNorm(int64_t hidden_size, double eps, c10::Device device, c10::ScalarType dtype,
                     const TensorParallel& tp)
    : eps_(eps), tp_(tp) {
  require_group(tp, "LayerNorm");
  at::Tensor ones = at::ones({hidden_size}, options_for(device, dtype));
  weight = register_parameter_with_spec("weight", ones, ParameterSpec::replicated(ones));
  at::Tensor zeros = at::zeros({hidden_size}, options_for(device, dtype));
  bias = register_parameter_with_spec("bias", zeros, ParameterSpec::replicated(zeros, TRIAX_PARAM_NO_WEIGHT_DECAY));
}

at::Tensor LayerNorm::forward(const at::Tensor& x) {
  const c10::ScalarType compute = at::promote_types(x.scalar_type(), at::kFloat);  // fp64 stays fp64
  const at::Tensor y = at::layer_norm(x.to(compute), {x.size(-1)}, replicated_on_sequence_shard(weight, tp_).to(compute),
                                      replicated_on_sequence_shard(bias, tp_).to(compute), eps_);
  return y.to(x.scalar_type());
}

at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits, const at::Tensor& labels, const at::Tensor& mask,
                                        int64_t vocab_start, int64_t vocab_size, const TensorParallel& tp) {
  require_group(tp, "vocab_parallel_cross_entropy");
  at::Tensor scores = logits.to(at::promote_types(logits.scalar_type(), at::kFloat));  // fp64 stays fp64
  at::Tensor per_token = vocab_parallel_token_losses(scores, labels, vocab_start, vocab_size, tp);
  if (!mask.defined()) return per_token.mean();
  at::Tensor m = mask.to(scores.scalar_type());
  return (per_token * m).sum() / m.sum().clamp_min(1.0);
}

}  // namespace triax
