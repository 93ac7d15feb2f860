#include "train/validation.hpp"

#include <ATen/ATen.h>

#include <chrono>
#include <cmath>

#include "step/micro_batch_request.hpp"
#include "train/trainer_state.hpp"
#include "triax/pipeline_evaluation.hpp"

namespace triax {

Validation::Validation(TrainerState& state)
    : s_(state),
      interval_(state.config.tokens.val_check_interval),
      micro_batches_(state.config.tokens.limit_val_batches),
      pipeline_(EngineContext::from_c(state.contexts->engine())) {}

bool Validation::due(int64_t step) const {
  return enabled() && (step % interval_ == 0 || step == s_.config.tokens.train_steps);
}

ValidationMetrics Validation::evaluate(int64_t step) {
  const auto start = std::chrono::steady_clock::now();
  MicroBatchRequest batches(s_.micro_batch_place(), *s_.model, s_.data->validation_samples(step, micro_batches_), step,
                            micro_batches_);
  batches.feed().inject_faults = false;  // the fault points are a training step's
  const MicroBatchFeed& feed = batches.feed();
  // An error stops the run, so the mode needs no restoring on that path.
  s_.model->set_training(false);
  const std::vector<at::Tensor> losses =
      evaluate_pipeline(pipeline_, StepRequest(batches.request()), s_.engine->chunk_placement());
  s_.model->set_training(true);

  // [sum of loss x counted tokens, counted tokens] of this rank's micro-batches; the last
  // pipeline stage holds them, so the sum over pp and dp is the sum over every micro-batch.
  const at::TensorOptions options = at::TensorOptions().dtype(at::kDouble).device(s_.device);
  at::Tensor totals = at::zeros({2}, options);
  for (size_t i = 0; i < losses.size(); ++i) {
    const auto counted = static_cast<double>(feed.counted_tokens(static_cast<int32_t>(i)));
    totals[0] += losses[i].to(options).reshape({}) * counted;
    totals[1] += counted;
  }
  if (s_.communicator.size(TRIAX_GROUP_PP) > 1) s_.communicator.all_reduce(TRIAX_GROUP_PP, totals, TRIAX_REDUCE_SUM);
  // With context parallelism each cp rank's loss is scaled so that their mean is the sequences'
  // mean (triax/layers/context_parallel.hpp): the sum over cp counts every token cp times.
  const int cp = s_.communicator.size(TRIAX_GROUP_CP);
  const triax_group replicas = cp > 1 ? TRIAX_GROUP_DP_CP : TRIAX_GROUP_DP;
  if (s_.communicator.size(replicas) > 1) s_.communicator.all_reduce(replicas, totals, TRIAX_REDUCE_SUM);
  const at::Tensor host = totals.cpu();

  ValidationMetrics metrics;
  metrics.step = step;
  metrics.total_steps = s_.config.tokens.train_steps;
  metrics.tokens = static_cast<int64_t>(host[1].item<double>()) / cp;
  metrics.loss = host[0].item<double>() / host[1].item<double>();
  metrics.perplexity = std::exp(metrics.loss);
  metrics.micro_batches = micro_batches_;
  metrics.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return metrics;
}

std::string Validation::describe() const {
  if (!enabled()) return "validation: off (tokens.val_check_interval)";
  const int64_t samples = micro_batches_ * s_.config.tokens.micro_batch_size * s_.communicator.size(TRIAX_GROUP_DP);
  return "validation: every " + std::to_string(interval_) + " steps and after the last, " +
         std::to_string(micro_batches_) + " micro-batches per replica (" + std::to_string(samples) +
         " held-out samples, the same each time), forward only; its time is not in the steps' rates";
}

}  // namespace triax
