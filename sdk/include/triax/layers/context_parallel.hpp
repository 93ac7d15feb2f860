// Context parallelism inside a model: the cp ranks hold slices of the same sequences
// (context_parallel_slice.hpp) and the same parameters. Three things differ from one rank:
//
// - Attention: a query needs the keys and values of every earlier token, held by other cp ranks.
//   Each layer all-gathers K and V over the cp group (one collective for both) and attends its
//   own queries to the whole sequence under a mask built from where each token sits; backward
//   reduce-scatters dK and dV back to the ranks that computed them. With grouped-query attention
//   K and V are small beside Q (docs/context_parallelism.md gives the arithmetic). Or, with
//   parallelism.context_parallel_attention: ring, K/V blocks go around the cp ranks
//   (ring_attention.hpp).
// - Rotary positions: each token keeps its place in the sequence (the host passes position_ids).
// - The loss: each rank's mean is over its own tokens; scaled by its share of the counted tokens
//   (times cp), the average over the cp group is the mean over the whole sequences, so the host
//   averages losses and gradients over dp x cp as it does over dp.
//
// Document masking and a sliding window work through the same positions: documents from where
// the positions restart (gathered over cp), the window from the token indices.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>

#include "triax/host.hpp"
#include "triax/layers/attention_mask.hpp"
#include "triax/model.hpp"

namespace torch::autograd {
struct AutogradContext;
}

namespace triax {

struct ContextParallel {
  int rank = 0;
  int size = 1;
  Host host;
  // parallelism.context_parallel_attention: ring: attention passes K/V blocks around the cp ring
  // (ring_attention.hpp) instead of all-gathering them.
  bool ring = false;

  // This rank's place in TRIAX_GROUP_CP, as the host says (a host before ABI 1.10: none).
  static ContextParallel of(const Host& host);
  // ... and the model's choice of cp attention.
  static ContextParallel of(const ModelContext& context);
  bool active() const { return size > 1; }
};

// The masked-attention inputs of one forward over this rank's `local_length` tokens:
// the mask [local, sequence] (with documents [batch, 1, local, sequence]) over the keys in the
// order gather_keys_values joins them, and position_ids as given (each token's place in the
// sequence, or with documents in its document). Collective over cp with documents.
// With cp.ring no mask: `mask` holds each token's document instead, int64 [batch, sequence] in
// sequence order, or an empty tensor without documents (ring_masking reads it).
MaskedAttention context_parallel_attention_inputs(const AttentionMasking& masking, const at::Tensor& position_ids,
                                                  int64_t local_length, const ContextParallel& cp,
                                                  c10::Device device);

// A ContextParallel kept in an autograd function's context for its backward, and back.
void save_context_parallel(torch::autograd::AutogradContext* ctx, const ContextParallel& cp);
ContextParallel saved_context_parallel(torch::autograd::AutogradContext* ctx);

// k, v: [batch, kv_heads, local, head_dim] -> every cp rank's, joined in rank order along the
// sequence: [batch, kv_heads, sequence, head_dim]. Backward: the gradients summed over cp, each
// rank keeping those of its own tokens (reduce-scatter).
std::array<at::Tensor, 2> gather_keys_values(const at::Tensor& k, const at::Tensor& v, const ContextParallel& cp);

// The factor on this rank's mean loss over its counted tokens (label_mask [batch, local], or
// undefined: all `tokens` count) that makes the cp group's average the mean over every counted
// token of the sequences: cp x counted here / counted in the group. A scalar without gradient;
// collective over cp.
at::Tensor context_parallel_loss_weight(const at::Tensor& label_mask, int64_t tokens, const ContextParallel& cp,
                                        c10::Device device);

}  // namespace triax
