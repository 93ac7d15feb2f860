// What attention keeps from beyond plain causality: the documents packed into one sample
// (document masking) and a sliding window, as nanotron's _use_doc_masking and
// sliding_window_size set them.
//
// Documents: the host gives each token its position inside its document, [batch, seq] int64,
// restarting at 0 where a document starts (as nanotron's collator computes them from the token
// index). A query attends only to earlier keys of its own document, and rotary embeds the
// in-document positions, so a packed row computes what each document run alone would.
// Window: a query at position i sees the keys at i - window + 1 ... i, `window` keys with itself
// (nanotron passes flash-attention window_size = (window - 1, 0); transformers' sliding_window).
//
// With neither, no mask exists: attention runs scaled_dot_product_attention's causal path.
// Otherwise one boolean mask per forward, [batch, 1, seq, seq] with documents, [seq, seq]
// without, is built once and shared by every layer of the stage.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

namespace triax {

// What a decoder's model_config asks of its attention.
struct AttentionMasking {
  std::optional<int64_t> sliding_window;  // keys a query sees, itself included; nullopt: all earlier keys
  bool documents = false;                 // attention stays inside each document (needs positions)

  bool masks() const { return sliding_window.has_value() || documents; }
};

// The extra inputs of one masked forward, beside a layer's own (rotary tables): the mask, and
// with documents the in-document positions. Both undefined: plain causal attention.
struct MaskedAttention {
  // bool, true where a query may attend a key; see attention_mask(). Under ring attention the
  // documents instead (context_parallel_attention_inputs in context_parallel.hpp says how).
  at::Tensor mask;
  at::Tensor position_ids;  // [batch, seq] int64 in-document positions, or undefined

  // The tensors to append to a layer's shared inputs (CausalLm's layer inputs), and back from
  // `shared` starting at index `first` (nothing there: plain causal attention).
  std::vector<at::Tensor> tensors() const;
  static MaskedAttention from(const std::vector<at::Tensor>& shared, size_t first);
};

// Boolean [queries, keys]: the key at key_positions[k] is visible to the query at
// query_positions[q] when it is not later and, with a window, less than `window` positions back.
at::Tensor causal_visibility(const at::Tensor& query_positions, const at::Tensor& key_positions,
                             std::optional<int64_t> window);

// The mask of one forward over `sequence_length` tokens on `device`. position_ids: [batch, seq]
// in-document positions (required when masking.documents). Undefined when masking masks nothing.
at::Tensor attention_mask(const AttentionMasking& masking, const at::Tensor& position_ids, int64_t sequence_length,
                          c10::Device device);

// Rotary tables per row at in-document positions: the rows of cos and sin ([positions, head_dim])
// that row `row` of position_ids ([batch, seq]) names, [seq, head_dim] each.
std::array<at::Tensor, 2> rotary_rows(const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& position_ids,
                                      int64_t row);

}  // namespace triax
