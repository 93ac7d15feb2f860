// Linear layers split over the tensor-parallel group, Megatron style. A column-parallel layer
// followed by a row-parallel one (attention's q/k/v then o, the MLP's gate/up then down) needs
// one collective in forward and one in backward, by tp_mode:
//
//   ALL_REDUCE      activations between blocks are whole and identical on every tp rank.
//                   Column: identity forward, gradient all-reduced in backward.
//                   Row: partial outputs all-reduced in forward, identity backward.
//   REDUCE_SCATTER  (sequence parallel) activations between blocks are sequence shards
//                   [batch, seq/tp, hidden]. Column: all-gather along the sequence in forward,
//                   reduce-scatter in backward. Row: reduce-scatter along the sequence in
//                   forward, all-gather in backward.
//
// Weights are created empty on the model's device and dtype; the model initialises them
// (triax/init.hpp) so that every topology starts from the same global values.
//
// Weight layouts (LinearOptions): [out, in] by default (torch.nn.Linear); input_major stores
// [in, out] (Hugging Face's Conv1D, GPT-2), so checkpoints and exports keep that layout. A fused
// projection of `parts` outputs (q, k, v of one matrix) keeps the parts as a dimension of their
// own, [parts, out, in] or [in, parts, out], so that each tp rank holds its slice of every part;
// its output is [..., parts x out/tp], part by part. A projection of `groups` blocks of out
// features each keeps the blocks as its first dimension instead, [groups, out, in], and tp shards
// whole blocks (grouped-query q/k/v: one block per key/value head, its query, key and value
// heads); its output is [..., groups/tp x out], block by block.
//
// FP8 (triax/fp8.hpp): compute_in_fp8 switches a layer to fp8 products (triax/layers/fp8_linear.hpp);
// until then, and always without an fp8 section, the layer computes as written here.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <optional>
#include <string>

#include "triax/layers/fp8_linear.hpp"
#include "triax/layers/recomputed_activation.hpp"
#include "triax/layers/tensor_parallel.hpp"
#include "triax/parameter.hpp"

namespace triax {

struct LinearOptions {
  int64_t in_features = 0;
  int64_t out_features = 0;
  bool bias = false;
  c10::Device device = c10::Device(c10::kCPU);
  c10::ScalarType dtype = c10::kFloat;
  int64_t parts = 1;         // a fused projection: `parts` outputs of out_features each
  bool input_major = false;  // the weight stored [in, out] (Conv1D) instead of [out, in]
  int64_t groups = 0;        // > 0: [groups, out_features, in], tp-sharded by whole groups (not with parts)
  int64_t widest_part = 0;   // groups: the widest of the maps each group joins (muP's fan_out per group)
  bool keeps_model_dtype = false;  // never computes in fp8 (the output head)

  // A layer of the model being built: on its device, in its dtype.
  static LinearOptions of(int64_t in_features, int64_t out_features, const ModelContext& context, bool bias = false) {
    return {in_features, out_features, bias, context.device, context.dtype};
  }
  // The same layer with its weight stored [in, out] and `parts` fused outputs.
  LinearOptions conv1d(int64_t fused_parts = 1) const {
    LinearOptions o = *this;
    o.input_major = true;
    o.parts = fused_parts;
    return o;
  }
};

// The input every column-parallel layer computes on, from the activations between blocks:
// ALL_REDUCE: x itself (its gradient summed over tp in backward); REDUCE_SCATTER: the sequence
// shards [b, s/tp, in] all-gathered into [b, s, in]. Layers that read the same activations (q, k
// and v; gate and up) gather once and call forward_gathered, so the collective runs once.
at::Tensor gather_column_parallel_input(const at::Tensor& x, const TensorParallel& tp);

class ColumnParallelLinear : public SpecifiedModule {
 public:
  ColumnParallelLinear(const LinearOptions& options, const TensorParallel& tp);
  // x: the activations between blocks ([b, s, in], or [b, s/tp, in] in REDUCE_SCATTER mode) ->
  // [b, s, out/tp], this rank's output features over the whole sequence.
  at::Tensor forward(const at::Tensor& x);
  // x already through gather_column_parallel_input: [..., in] -> [..., out/tp].
  at::Tensor forward_gathered(const at::Tensor& x);
  // A fused gate/up layer (two parts) at a decoding step's few rows: SwiGLU of forward(x)
  // computed with the product (decode_gate_up_swiglu), [..., out/tp / 2]; undefined where that
  // does not apply (grad mode on, fp8, a bias, sequence-parallel or overlapped tp, more rows).
  at::Tensor forward_swiglu_at_decode(const at::Tensor& x);
  // The [out/tp, in] matrix forward multiplies by, where a decoding step's kernel may take the
  // product in its place (decode_gate_up_swiglu, decode_norm_gemv); undefined where forward does
  // more (grad mode on, fp8, a bias, sequence-parallel or overlapped tp).
  at::Tensor matrix_at_decode() const;
  // From now on the products run in fp8. `name` (the module's) names the layer in the error
  // raised when its dimensions on this rank are not multiples of 16, or it keeps the model's dtype.
  void compute_in_fp8(Fp8Recipe recipe, const std::string& name);
  bool keeps_model_dtype() const { return keeps_model_dtype_; }
  std::array<int64_t, 2> matrix_shape() const;  // [out/tp, in]: the product's N and K on this rank
  at::Tensor weight, bias;

 private:
  at::Tensor matrix() const;  // the weight as one [out/tp, in] matrix
  void init_grouped(const LinearOptions& options, const TensorParallel& tp);

  TensorParallel tp_;
  bool input_major_ = false;
  bool keeps_model_dtype_ = false;
  std::optional<Fp8LinearPlan> fp8_;
};

class RowParallelLinear : public SpecifiedModule {
 public:
  RowParallelLinear(const LinearOptions& options, const TensorParallel& tp);
  // x: [b, s, in/tp] (this rank's input features) -> the sum over tp: [b, s, out] (ALL_REDUCE)
  // or this rank's sequence shard of it, [b, s/tp, out] (REDUCE_SCATTER). The bias is added
  // once, after the reduction.
  at::Tensor forward(const at::Tensor& x);
  // The same for a channel-major input, x [b, in/tp, s] (forward(x.transpose(1, 2))'s result),
  // computed without copying x to [b, s, in/tp] (triax/layers/channel_major_linear.hpp). In fp8
  // the quantisation reads the transposed view, as forward would.
  at::Tensor forward_channel_major(const at::Tensor& x);
  // forward(apply_activation(activation, x)). With `recompute` the activation's output is not kept
  // for backward, which runs the activation again (triax/layers/recomputed_activation.hpp).
  // In fp8 the activation's output is kept (as the fp8 product's input) even with `recompute`.
  at::Tensor forward_activated(RecomputedActivation activation, const at::Tensor& x, bool recompute);
  // As ColumnParallelLinear::compute_in_fp8.
  void compute_in_fp8(Fp8Recipe recipe, const std::string& name);
  bool computes_in_fp8() const { return fp8_.has_value(); }
  std::array<int64_t, 2> matrix_shape() const;  // [out, in/tp]: the product's N and K on this rank
  at::Tensor weight, bias;

 private:
  at::Tensor matrix() const;                           // the weight as [out, in/tp]
  at::Tensor reduce(const at::Tensor& partial) const;  // over tp, then the bias

  TensorParallel tp_;
  bool input_major_ = false;
  std::optional<Fp8LinearPlan> fp8_;
};

}  // namespace triax
