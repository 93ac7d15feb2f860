// The rotary embedding of grouped-query attention's queries and keys, read straight from the
// fused q/k/v projection's output (QkvLayout in grouped_query_attention.hpp), with the values
// beside them: what attention takes from one qkv_proj.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>

namespace triax {

// qkv: [batch, seq, kv_heads, group + 2, head_dim], per key/value head its `group` query heads,
// its key head and its value head (head_dim contiguous); cos, sin: [seq, head_dim] constant
// tables. Returns {q, k, v} in [batch, heads, seq, head_dim]: q (kv_heads x group heads) and k
// (kv_heads) through apply_rotary, v (kv_heads) a copy, so that attention's saved v does not keep
// the whole projection output alive.
//
// On CUDA (fused_ops.hpp's kernels) the rotary kernel reads q and k where the projection wrote
// them, and in backward writes their gradients straight into the one gradient of qkv, with v's
// beside them: no copy of the query heads, no join of the three gradients. v and its gradient
// are copied by the same kernel's copying walk (kernels::copy_heads), and q, k and v come in
// [batch, seq, heads, head_dim] storage (viewed as [batch, heads, seq, head_dim]). Composition:
// split_with_sizes over dim 3, apply_rotary on q and k, v made contiguous.
//
// record_gradient_amax: the CUDA backward also computes max |gradient of qkv| as it writes it and
// records it (docs/fp8.md, "The amax from the producer"), for the tensorwise fp8 q/k/v projection
// whose output qkv is; the composition ignores it.
std::array<at::Tensor, 3> rotary_qkv(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin,
                                     bool record_gradient_amax = false);

// Decoding with a cache: q, k and v of new tokens at each row's own positions, k and v written
// straight into the cache. qkv: [rows, new, kv_heads, group + 2, head_dim]; cos, sin: the whole
// tables [table length, head_dim] (a position past them reads their last row: sequence-parallel
// padding, discarded); positions: int64 [rows, new] on qkv's device; keys, values: the cache,
// contiguous [rows, kv_heads, capacity, head_dim], row r's new token j stored at position
// positions[r, j]. Returns q in [rows, heads, new, head_dim] (as rotary_qkv lays it out). No
// autograd. On CUDA one rotary launch for q, k and v (three with TRIAX_ROTARY_ONE_LAUNCH=0) reads
// the positions on the device (no gathered table rows, no scatter; what a CUDA graph of a decoding
// step needs). Composition:
// rotary_qkv on the gathered table rows, then scatter_ into keys and values.
at::Tensor rotary_qkv_into_cache(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin,
                                 const at::Tensor& positions, at::Tensor& keys, at::Tensor& values);

// The same q, k and v without rotation (a NoPE layer): q and k as views of qkv where possible,
// v a copy as above. Composition only (no kernel).
std::array<at::Tensor, 3> split_qkv(const at::Tensor& qkv);

}  // namespace triax
