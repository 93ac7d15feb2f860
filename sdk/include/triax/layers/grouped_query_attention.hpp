// Grouped-query causal self-attention with rotary embeddings (Hugging Face LlamaAttention, also
// Mistral's, Qwen2's and, with qk-norm and an explicit head_dim, Qwen3's), with inference over a
// KeyValueCache per sequence.
//
// q, k and v are one column-parallel projection, qkv_proj, grouped by key/value head (QkvLayout):
// one GEMM, and each tp rank holds whole groups, so whole query, key and value heads. o_proj is
// row-parallel, so attention itself runs on this rank's heads over the whole sequence, in either
// tp_mode. Attention runs through scaled_dot_product_attention with enable_gqa, so K/V
// heads are never repeated in memory.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "triax/causal_lm.hpp"
#include "triax/hf_mapping.hpp"
#include "triax/layers/attention_mask.hpp"
#include "triax/layers/linear.hpp"
#include "triax/layers/norm.hpp"
#include "triax/model.hpp"

namespace triax {

struct AttentionShape {
  int64_t hidden_size = 0;
  int64_t heads = 0;     // query heads
  int64_t kv_heads = 0;  // key/value heads, dividing heads
  bool qkv_bias = false;     // biases on q, k and v (Qwen2's attention_bias; Llama's sets both)
  bool output_bias = false;  // a bias on o_proj
  bool rotary = true;        // false: a NoPE layer, q and k enter attention unrotated
  // GPT-J's rotary pairs (features 2i, 2i+1 of a head) instead of Hugging Face's halves (i, i + head_dim/2).
  bool rope_interleaved = false;
  // Inference with a cache: a query sees this many positions, itself included (the window the
  // training forward gets as its mask, attention_mask.hpp); nullopt: all earlier ones.
  std::optional<int64_t> sliding_window;
  // Features of each head; 0: hidden_size / heads. Qwen3 gives its own, and heads x head_dim
  // need not be hidden_size (o_proj maps them back).
  int64_t head_dim = 0;
  // Qwen3's qk-norm: before RoPE, an RMSNorm over each query head and each key head, one weight of
  // head_dim for all query heads (q_norm) and one for all key heads (k_norm).
  bool qk_norm = false;
  double qk_norm_eps = 1e-6;

  int64_t features_per_head() const { return head_dim != 0 ? head_dim : hidden_size / heads; }
};

// qkv_proj's weight [kv_heads, (group + 2) x head_dim, hidden], group = heads / kv_heads: block j
// holds query heads j x group ... (j + 1) x group - 1 (Hugging Face's order, those that read key
// head j), then key head j, then value head j; the bias is [kv_heads, (group + 2) x head_dim].
// Equal tp slices of q, k and v would cut through heads when group > 1; slices of whole blocks
// never do, and the global shape stays one of the model, not of the topology. Hugging Face keeps
// q_proj, k_proj and v_proj apart: a TRIAX_HF_INTERLEAVE rule along dim 1.
struct QkvLayout {
  int64_t heads = 0, kv_heads = 0, head_dim = 0;

  static QkvLayout of(const AttentionShape& shape) { return {shape.heads, shape.kv_heads, shape.features_per_head()}; }

  int64_t group() const { return heads / kv_heads; }
  // The fused parameter's whole shape, [kv_heads, (group + 2) x head_dim] + trailing (the input
  // features of the weight; none for the bias).
  std::vector<int64_t> shape(std::vector<int64_t> trailing) const;
  // q [heads x head_dim, ...], k and v [kv_heads x head_dim, ...] -> the fused layout, and back.
  at::Tensor fuse(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) const;
  std::array<at::Tensor, 3> split(const at::Tensor& fused) const;
  // The tensor rule between prefix + "qkv_proj." + what and Hugging Face's prefix + "q_proj." +
  // what, "k_proj.", "v_proj." (what: "weight", trailing {hidden}; "bias", trailing {}).
  HfTensorRule hf_rule(const std::string& prefix, const std::string& what, std::vector<int64_t> trailing) const;
};

class GroupedQueryAttention : public torch::nn::Module {
 public:
  // The model checked that heads and kv_heads split evenly over the tensor-parallel group.
  GroupedQueryAttention(const AttentionShape& shape, const ModelContext& context);

  // x: [batch, seq, hidden] -> [batch, seq, hidden] ([batch, seq/tp, hidden] both in
  // REDUCE_SCATTER mode); cos, sin: [seq, head_dim] of the whole sequence, in x's dtype.
  // `masked`: the forward's mask (documents, sliding window); with its position_ids, rotary
  // embeds each row's in-document positions. Empty: causal attention at positions 0..seq-1.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                     const MaskedAttention& masked = {});
  // Inference: the new tokens of each row of `step` (their KeyValueCache in step.rows) at their
  // positions, within the shape's sliding window; cos, sin: the whole tables
  // [max_position_embeddings, head_dim].
  at::Tensor forward_cached(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const CachedStep& step);
  // forward_cached from qkv_proj's output (a decoding step's product with the norm folded in).
  at::Tensor forward_cached_projected(const at::Tensor& projected, const at::Tensor& cos, const at::Tensor& sin,
                                      const CachedStep& step);

  std::shared_ptr<ColumnParallelLinear> qkv_proj;  // QkvLayout
  std::shared_ptr<RowParallelLinear> o_proj;
  // With AttentionShape::qk_norm: weights [head_dim], replicated over tp. Each tp rank normalises
  // its own heads, so their gradients are summed over tp in either tp_mode.
  std::shared_ptr<RMSNorm> q_norm, k_norm;

  // QK-clip (MuonClip, src/qk_clip.cpp): with tracking on, every training forward keeps each of
  // this rank's query heads' largest pre-softmax logit (under the causal, document or window
  // mask); not with context parallelism.
  void track_logits(bool enable);
  // The factors on qkv_proj's weight ([kv_heads/tp, (group + 2) x head_dim, 1]) and bias
  // ([kv_heads/tp, (group + 2) x head_dim]) that bring each head whose largest logit, over the
  // data-parallel replicas, exceeds `threshold` down to it: its query rows x threshold / max, or,
  // where it alone reads its key head (MHA), query and key rows x sqrt(threshold / max) each (a
  // key head shared by several query heads is left alone: its other heads may be below). The
  // maxima start again. Called by every data-parallel rank alike.
  std::array<at::Tensor, 2> qk_clip_factors(double threshold);

  // For a tensorwise fp8 qkv_proj (convert_linears_to_fp8): the rotary kernel's backward also
  // computes and records the amax of qkv_proj's output gradient as it writes it (docs/fp8.md, "The
  // amax from the producer"). Only where that gradient is the kernel's own (rotated halves, no
  // qk-norm); elsewhere the flag changes nothing.
  void record_qkv_gradient_amax(bool record) { record_qkv_gradient_amax_ = record; }
  bool records_qkv_gradient_amax() const {
    return record_qkv_gradient_amax_ && rotary_ && !rope_interleaved_ && !q_norm;
  }

 private:
  // The running maximum of the logits of q against k ([batch, heads, seq, head_dim] each side,
  // k with its kv heads) under the forward's mask.
  void keep_logit_maxima(const at::Tensor& q, const at::Tensor& k, const MaskedAttention& masked);

  // qkv_proj's output as [batch, seq, kv_heads/tp, group + 2, head_dim] (rotary_qkv's input),
  // its query and key heads normalised with qk-norm.
  at::Tensor project_blocks(const at::Tensor& x);
  at::Tensor blocks_of(const at::Tensor& projected);  // project_blocks of qkv_proj's output
  // project_blocks' query and key heads through q_norm and k_norm, the value heads as they are.
  at::Tensor normalised_query_key_heads(const at::Tensor& blocks) const;
  at::Tensor output(const at::Tensor& attended);  // [batch, heads, seq, head_dim] -> o_proj
  // q, k and v of project_blocks' output, [batch, heads, seq, head_dim], positioned as this layer
  // says: rotated (halves or GPT-J pairs) or, in a NoPE layer, as projected.
  std::array<at::Tensor, 3> positioned_qkv(const at::Tensor& blocks, const at::Tensor& cos, const at::Tensor& sin) const;
  // positioned_qkv of each row at its own positions (position_ids [batch, seq]: documents).
  std::array<at::Tensor, 3> positioned_qkv_at(const at::Tensor& blocks, const at::Tensor& cos, const at::Tensor& sin,
                                              const at::Tensor& position_ids) const;

  TensorParallel tp_;
  int64_t local_heads_;     // query heads on this tp rank
  int64_t local_kv_heads_;  // key/value heads on this tp rank
  int64_t group_;           // query heads per key/value head
  int64_t head_dim_;
  double scale_;
  bool rotary_, rope_interleaved_;
  std::optional<int64_t> sliding_window_;
  bool cp_ring_;  // with context parallelism: ring attention instead of the K/V all-gather
  at::Tensor logit_maxima_;  // [local heads] fp32 while QK-clip tracks logits, else undefined
  bool record_qkv_gradient_amax_ = false;
};

}  // namespace triax
