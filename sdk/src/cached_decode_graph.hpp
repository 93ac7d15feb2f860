// A CUDA graph of CausalLm's decoding step (StageInput::cuda_graph): one new token for each row
// of the same caches, in the same order. The first such step runs as usual and names the rows
// (cuBLAS and the allocator warm up); the second is recorded (CudaStepGraph) and the next ones
// replay it, so that a step costs the host one launch instead of one per kernel. A step's tokens
// and positions are copied into the graph's own input tensors before each replay; the caches'
// keys and values are written in place at the addresses the graph recorded. CausalLm drops the
// graph at any other forward_cached and at cache_create.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "triax/cuda_step_graph.hpp"
#include "triax/inference_cache.hpp"

namespace triax {

class CachedDecodeGraph {
 public:
  // work(ids, positions) -> logits: the step's device work, with no host synchronisation.
  using Work = std::function<at::Tensor(const at::Tensor& ids, const at::Tensor& positions)>;

  explicit CachedDecodeGraph(std::vector<const InferenceCache*> rows) : rows_(std::move(rows)) {}

  // Whether this graph's steps continue exactly these rows.
  bool serves(const std::vector<const InferenceCache*>& rows) const { return rows == rows_; }
  // The step's logits: work run directly (first step), recorded and run (second), or replayed.
  at::Tensor run(const at::Tensor& ids, const at::Tensor& positions, const Work& work);

 private:
  std::vector<const InferenceCache*> rows_;
  int64_t steps_ = 0;
  std::unique_ptr<CudaStepGraph> graph_;
  at::Tensor ids_, positions_, logits_;  // the graph's inputs and output
};

}  // namespace triax
