// Ring attention: context parallelism's attention without gathering K and V
// (parallelism.context_parallel_attention: ring; the default all-gather is context_parallel.hpp's).
//
// The cp ranks form a ring. At step s (of cp) a rank holds the K/V block of rank (rank - s) mod cp,
// starting with its own; it posts the block's transfer to rank + 1 (and the receipt of the next
// from rank - 1) with triax_host.start_send_recv, attends its queries to the block meanwhile, and
// waits. The blocks' partial softmaxes are merged as they come (ring_blocks.hpp), so a rank holds
// one remote block at a time instead of the whole sequence's K/V and no [local, sequence] mask.
//
// Backward runs the ring again: each step recomputes the held block's probabilities from the
// saved q, the block's k/v and the merged output and log-sum-exp, adds to dq, and passes the
// block's k and v on together with the dk/dv summed so far (the previous step's, finished while
// the next block's attention runs). After the last step each block's sums go to its owner, so
// every rank ends with the gradients of its own k and v.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

#include "triax/layers/attention_mask.hpp"
#include "triax/layers/context_parallel.hpp"
#include "triax/layers/ring_blocks.hpp"

namespace triax {

// The ring's masking from the attention inputs context_parallel_attention_inputs gives it
// (documents, when any) and the layer's sliding window.
RingMasking ring_masking(const MaskedAttention& masked, std::optional<int64_t> window);

// q: [batch, heads, local, head_dim], this rank's queries (context_parallel_slice.hpp's tokens);
// k, v: [batch, kv_heads, local, head_dim] (kv_heads divides heads). Returns this rank's attention
// output [batch, heads, local, head_dim], differentiable in q, k and v. Collective over cp.
at::Tensor ring_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const ContextParallel& cp,
                          double scale, const RingMasking& masking);

}  // namespace triax
