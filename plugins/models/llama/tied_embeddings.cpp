#include "tied_embeddings.hpp"

#include <ATen/ATen.h>

namespace triax::llama {

TiedVocabParallelEmbedding::TiedVocabParallelEmbedding(int64_t padded_vocab_size, int64_t hidden_size,
                                                       c10::Device device, c10::ScalarType dtype,
                                                       const TensorParallel& tp, const std::string& tied_key)
    : VocabParallelEmbedding(padded_vocab_size, hidden_size, device, dtype, tp) {
  // Register the same tensor again with the tied metadata added to the layer's own.
  ParameterSpec spec = *spec_of("weight");
  spec.flags |= TRIAX_PARAM_TIED;
  spec.tied_key = tied_key;
  at::Tensor tensor = weight;
  parameters_.erase("weight");
  weight = register_parameter_with_spec("weight", tensor, std::move(spec));
}

std::shared_ptr<ColumnParallelLinear> make_tied_lm_head(const at::Tensor& embedding_weight, int64_t hidden_size,
                                                        int64_t padded_vocab_size, const TensorParallel& tp) {
  LinearOptions options;
  options.in_features = hidden_size;
  options.out_features = padded_vocab_size;
  options.device = c10::Device(c10::kMeta);  // the placeholder weight allocates nothing
  options.dtype = embedding_weight.scalar_type();
  auto head = std::make_shared<ColumnParallelLinear>(options, tp);
  head->weight = embedding_weight;
  return head;
}

}  // namespace triax::llama
