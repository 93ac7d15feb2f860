// Tied word embeddings: the lm_head multiplies by the token embedding's weight.
//
// When one pipeline stage holds both the embedding and the head, they use the same tensor and
// the parameter is listed once (model.embed_tokens.weight). When they sit on different stages,
// each holds its own copy under that same name, flagged TRIAX_PARAM_TIED with the tied key
// "model.embed_tokens.weight": both copies start from the same values (initialisation is seeded
// by name) and the host sums their gradients before the optimizer step.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>

#include "triax/layers/embedding.hpp"
#include "triax/layers/linear.hpp"
#include "triax/layers/tensor_parallel.hpp"

namespace triax::llama {

constexpr const char* kTiedEmbeddingKey = "model.embed_tokens.weight";

// A column-parallel lm_head computing with `embedding_weight` ([vocab/tp, hidden], the same
// vocabulary slice as the embedding's) instead of a weight of its own. It owns no storage; do
// not register it as a submodule: the weight is already registered by the embedding.
std::shared_ptr<ColumnParallelLinear> make_tied_lm_head(const at::Tensor& embedding_weight, int64_t hidden_size,
                                                        int64_t padded_vocab_size, const TensorParallel& tp);

}  // namespace triax::llama
