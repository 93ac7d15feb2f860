// One step's gradients, from the backward to the optimizer, in order:
//   1. accumulated over the step's micro-batches as each chunk's backward ends (GradientAccumulator);
//   2. summed over the pipeline stages that hold a tied parameter (TiedGradients);
//   3. averaged over the data-parallel replicas, overlapping the last backward where the backend
//      allows (DataParallelGradients);
//   4. measured by the global norm, which clipping uses.
// It owns the one list of gradient tensors these stages share: the engine step hands it each
// chunk's backward, the trainer calls reduce() once per step and gives the optimizer for_optimizer().
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "triax/parallel/data_parallel_gradients.hpp"
#include "gradients/gradient_accumulator.hpp"
#include "gradients/tied_gradients.hpp"

namespace triax {

class OptimizerInstance;

struct StepGradientOptions {
  bool accumulate_in_fp32 = true;    // optimizer.accumulate_grad_in_fp32
  int64_t micro_batches = 1;         // per step and replica
  int64_t bucket_cap_bytes = 0;      // model.ddp_bucket_cap_mb
  bool overlap_with_backward = true;  // false when the step is a CUDA graph, which cannot hold the reductions
};

class StepGradients {
 public:
  // `parameters`: this rank's, every model chunk's in chunk order; `chunk_of_parameter`: the chunk
  // holding each (ModelChunks::parameter_chunks). `tied`: the model's tied parameters (made first:
  // ReplicaOwnership asks it which copy counts); `ownership`: which copy of each parameter counts
  // in the norm.
  StepGradients(const std::vector<NamedParameter>& parameters, std::vector<int> chunk_of_parameter, int chunk_count,
                std::unique_ptr<TiedGradients> tied, const ReplicaOwnership& ownership,
                const OptimizerInstance& optimizer, Communicator& communicator, const StepGradientOptions& options);
  ~StepGradients();
  StepGradients(const StepGradients&) = delete;
  StepGradients& operator=(const StepGradients&) = delete;

  // The engine step's hooks: before the first micro-batch, and after each micro-batch's backward
  // through `chunk`, whose parameters are [first, end).
  void begin_step();
  void after_backward(int chunk, size_t first, size_t end);
  // Finishes the accumulation; inside a CUDA graph's capture, so that a replay leaves them finished.
  void finish_accumulation() { accumulator_.gradients(); }

  // After the engine's step: steps 2 to 4 above. The norm is not read back.
  GlobalNorm reduce(std::optional<double> clip_grad);
  // What the optimizer's step gets: whole mean gradients, or this rank's shards of them (ZeRO).
  const std::vector<at::Tensor>& for_optimizer() const { return data_parallel_.for_optimizer(); }
  // The accumulated gradients before the pipeline and data-parallel sums (fault injection poisons them).
  const std::vector<at::Tensor>& accumulated() { return accumulator_.gradients(); }

  // Lines for the start-up log.
  std::vector<std::string> describe(const std::string& model_dtype) const;

 private:
  std::unique_ptr<TiedGradients> tied_;
  GradientAccumulator accumulator_;
  DataParallelGradients data_parallel_;
  Communicator& communicator_;
  int64_t micro_batches_;
};

}  // namespace triax
