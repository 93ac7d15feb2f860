#include "triax/layers/attention_mask.hpp"

#include <ATen/ATen.h>

#include <string>

#include "triax/error.hpp"
#include "triax/tensor_text.hpp"

namespace triax {

std::vector<at::Tensor> MaskedAttention::tensors() const {
  if (!mask.defined()) return {};
  if (!position_ids.defined()) return {mask};
  return {mask, position_ids};
}

MaskedAttention MaskedAttention::from(const std::vector<at::Tensor>& shared, size_t first) {
  MaskedAttention masked;
  if (shared.size() > first) masked.mask = shared[first];
  if (shared.size() > first + 1) masked.position_ids = shared[first + 1];
  return masked;
}

at::Tensor causal_visibility(const at::Tensor& query_positions, const at::Tensor& key_positions,
                             std::optional<int64_t> window) {
  const at::Tensor query = query_positions.unsqueeze(-1), key = key_positions.unsqueeze(-2);
  at::Tensor visible = key <= query;
  if (window) visible = visible & (key > query - *window);
  return visible;
}

at::Tensor attention_mask(const AttentionMasking& masking, const at::Tensor& position_ids, int64_t sequence_length,
                          c10::Device device) {
  if (!masking.masks()) return {};
  const at::Tensor index = at::arange(sequence_length, at::TensorOptions().dtype(at::kLong).device(device));
  const at::Tensor causal = causal_visibility(index, index, masking.sliding_window);  // [seq, seq]
  if (!masking.documents) return causal;
  if (!position_ids.defined())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "model_config._use_doc_masking: the forward got no position_ids (the host passes them from ABI 1.9 "
                "on, with a token dataset)");
  if (position_ids.dim() != 2 || position_ids.size(1) != sequence_length)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "position_ids " + shape_text(position_ids.sizes()) +
                                                  " must be [batch, " + std::to_string(sequence_length) + "]");
  // A document starts where its positions restart at 0; its number is the count of starts so far.
  const at::Tensor document = (position_ids.to(device) == 0).cumsum(1);  // [batch, seq]
  const at::Tensor same_document = document.unsqueeze(2) == document.unsqueeze(1);
  return (same_document & causal).unsqueeze(1);  // [batch, 1, seq, seq]
}

std::array<at::Tensor, 2> rotary_rows(const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& position_ids,
                                      int64_t row) {
  const at::Tensor positions = position_ids.select(0, row).to(cos.device());
  return {cos.index_select(0, positions), sin.index_select(0, positions)};
}

}  // namespace triax
