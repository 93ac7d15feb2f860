// The block arithmetic of ring attention (ring_attention.hpp), free of communication: this cp
// rank's queries attend one cp rank's K/V block at a time, and the partial results are merged
// with the online-softmax rule.
//
// Each rank holds two chunks of every sequence (context_parallel_slice.hpp), so a (query chunk,
// key chunk) pair is, under causality, fully visible (the keys' chunk comes first), causal
// (the same chunk: the diagonal) or invisible (the keys' chunk comes later: skipped). Document
// masking and a sliding window add an explicit mask to the visible pairs, built from where the
// tokens sit; a window also skips the pairs lying wholly behind it.
//
// A block gives, per query, a partial output and the log-sum-exp of its scores (-inf where the
// query sees none of the block's keys). Merging (o1, l1) and (o2, l2):
//   l = log(exp(l1) + exp(l2)),  o = o1 exp(l1 - l) + o2 exp(l2 - l)
// The backward of a block needs only the merged output and log-sum-exp: its probabilities are
// exp(scores - l), and dS = P (dP - rowsum(dO * O)), which the attention kernels' backward
// computes when handed the merged O and l.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <array>
#include <cstdint>
#include <functional>
#include <optional>

namespace triax {

// What a query sees beyond causality.
struct RingMasking {
  std::optional<int64_t> window;  // keys a query sees, itself included; nullopt: all earlier keys
  at::Tensor documents;           // [batch, sequence] int64 document index per token, in sequence order, or undefined

  bool masks() const { return window.has_value() || documents.defined(); }
};

class RingBlocks {
 public:
  // This cp rank's queries (rank of size, chunks of chunk_length tokens) on `device`, their
  // scores scaled by `scale`.
  RingBlocks(int rank, int size, int64_t chunk_length, double scale, RingMasking masking, c10::Device device);

  // The merged attention so far: out [batch, heads, local, head_dim] and lse [batch, heads, local],
  // both in the kernels' accumulation type (float for float, bfloat16 and half; double for double).
  struct Merged {
    at::Tensor out, lse;
  };
  // Nothing attended yet: out 0, lse -inf. q: [batch, heads, local, head_dim].
  static Merged start(const at::Tensor& q);

  // Merges the attention of q to cp rank `source`'s block (k, v: [batch, kv_heads, local, head_dim];
  // kv_heads divides heads) into `merged`.
  void attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int source, Merged& merged) const;

  // The backward through `source`'s block, given the merged out (q's dtype) and lse and the
  // output's gradient: adds the block's share of q's gradient to dq (accumulation type) and
  // returns the block's dk and dv (k's dtype).
  std::array<at::Tensor, 2> backward(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                                     const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse, int source,
                                     at::Tensor& dq) const;

 private:
  enum class Pair { Invisible, Causal, Full };
  // The chunk of the sequence that chunk `half` (0 or 1) of cp rank `rank` holds.
  int64_t chunk_of(int rank, int half) const;
  Pair pair(int64_t query_chunk, int64_t key_chunk) const;
  // Calls visit(first query, first key, mask or undefined, causal) for each (query chunk, key
  // chunk) pair of `source`'s block that is not invisible; positions are offsets in the local rows.
  using PairVisitor = std::function<void(int64_t, int64_t, const at::Tensor&, bool)>;
  void for_each_visible_pair(int source, const PairVisitor& visit) const;
  // Boolean [batch or 1, 1, chunk, chunk]: which keys of key_chunk the queries of query_chunk see.
  at::Tensor visibility(int64_t query_chunk, int64_t key_chunk, c10::Device device) const;

  int rank_, size_;
  int64_t chunk_;
  double scale_;
  RingMasking masking_;
  c10::Device device_;
};

}  // namespace triax
