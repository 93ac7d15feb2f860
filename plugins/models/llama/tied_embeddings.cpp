#include "tied_embeddings.hpp"

#include <ATen/ATen.h>

namespace triax::llama {

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
