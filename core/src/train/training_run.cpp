#include "train/training_run.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "comm/world_reduce.hpp"
#include "train/trainer_state.hpp"
#include "triax/device/device.hpp"
#include "triax/report/pass_record_format.hpp"
#include "triax/report/report_options.hpp"
#include "triax/faults/fault_injection.hpp"
#include "triax/fp8.hpp"
#include "triax/report/log.hpp"

namespace triax {

TrainingRun::TrainingRun(TrainerState& state)
    : s_(state),
      c_(state.config),
      resolved_config_(state.write_resolved_config()),
      reporter_(run_reporter_options(c_, state.is_logging_rank(), state.resume.step)),
      profiler_(profiler_options(c_), state.communicator.rank(TRIAX_GROUP_WORLD), state.device.is_cuda()),
      schedule_(state.resume.lr_scheduler),
      nonfinite_(c_),
      preemption_watch_(c_.general.preemption_signals),
      validation_(state) {
  for (const auto& line : s_.describe_run()) log::info(line);
  if (validation_.enabled()) log::info(validation_.describe());
  for (const auto& line : reporter_.describe()) log::info(line);
  if (c_.profiler) log::info(profiler_.describe());
  if (c_.parallelism.pp_pass_record) open_pass_record();
  summary_.consumed_tokens = s_.resume.consumed_tokens;
}

TrainSummary TrainingRun::run() {
  if (s_.resume.step == 0 && s_.checkpoint->due(0))
    s_.checkpoint->save(0, 0, s_.resume.lr_scheduler, resolved_config_);
  if (s_.resume.step >= c_.tokens.train_steps)
    log::warning("the checkpoint is at step " + std::to_string(s_.resume.step) + ", tokens.train_steps is " +
                 std::to_string(c_.tokens.train_steps) + ": nothing left to train");
  const StepRates rates{s_.tokens_per_step(), s_.communicator.size(TRIAX_GROUP_WORLD), s_.flops_per_token, s_.peak,
                        c_.tokens.train_steps};
  logger_.emplace(rates, s_.device, reporter_, nonfinite_, *s_.step_losses, s_.resume.step);
  for (int64_t step = s_.resume.step + 1; step <= c_.tokens.train_steps; ++step) {
    profiler_.before_step(step);
    const double learning_rate = schedule_.for_step(step);
    const StepValues values = train_step(step, learning_rate);
    s_.data->after_step(step);
    profiler_.after_step(step);
    report(step, values, learning_rate);
    validate(step);
    if (save_or_stop(step, values)) break;
  }
  s_.checkpoint->finish_saves();
  finish();
  return summary_;
}

TrainingRun::StepValues TrainingRun::train_step(int64_t step, double learning_rate) {
  const int rank = s_.communicator.rank(TRIAX_GROUP_WORLD);
  PassRecord& record = s_.pass_record;  // parallelism.pp_pass_record: the step's parts, when on
  record.begin_step(step);
  s_.communicator.set_step(step);  // labels communication errors and this rank's heartbeat
  // Every step casts its fp8 weights afresh at its first micro-batch (a step recorded in a CUDA
  // graph records those casts), whatever changed the weights before it (loads, steps).
  fp8_weights_changed();
  const EngineInstance::Result result = s_.engine_step->run(step, s_.data->step_samples(step));  // prefetched
  record.part_done("engine");
  logger_->flush();  // the GPU has this step's work queued: the last logged step's values are read now
  record.part_done("log");
  summary_.peak_live_micro_batches = std::max(summary_.peak_live_micro_batches, result.peak_live_micro_batches);
  if (fault::armed("nan_grad", rank, step)) s_.gradients->accumulated().front().fill_(NAN);
  const GlobalNorm clipping = s_.gradients->reduce(c_.optimizer.clip_grad);
  record.part_done("gradients");
  const at::Tensor losses = s_.step_losses->reduce(result, s_.communicator, s_.device);  // LM loss, aux losses
  record.part_done("losses");
  if (fault::armed("nan_loss", rank, step)) losses[0].fill_(NAN);
  fault::kill_if_armed("optimizer_step", rank, step);
  s_.checkpoint->before_optimizer_step();  // a save's copies read the parameters this step changes
  if (nonfinite_.admit(step, losses[0], clipping.norm)) {
    s_.optimizer->step(s_.gradients->for_optimizer(), learning_rate, clipping.coefficient);  // clipped by the optimizer
    s_.qk_clip->after_step();
    fp8_weights_changed();  // validation after the step must not use the step's fp8 weights
  }
  // The step's collectives have completed, or a CommunicationError names the silent peer. The
  // GPU still has the optimizer's work queued, so this wait costs it nothing.
  s_.communicator.settle();
  record.part_done("optimizer");
  record.end_step();
  losses_.push_back(losses[0]);
  norms_.push_back(clipping.norm);
  summary_.learning_rates.push_back(learning_rate);
  summary_.consumed_tokens += s_.tokens_per_step();
  return {losses, clipping.norm};
}

void TrainingRun::open_pass_record() {
  PassRecordPlace place;
  place.rank = s_.communicator.rank(TRIAX_GROUP_WORLD);
  place.pp_rank = s_.communicator.rank(TRIAX_GROUP_PP);
  place.pp_size = s_.communicator.size(TRIAX_GROUP_PP);
  place.chunks = s_.model->chunk_count();
  place.micro_batches = c_.tokens.batch_accumulation_per_replica;
  place.engine = c_.parallelism.pp_engine;
  place.device = s_.device;
  const std::string path = pass_record_path(c_.run_dir(), place.rank);
  s_.pass_record.open(path, std::move(place));
  log::info("pass record: each step's pipeline passes and parts, timed, into " + path);
}

void TrainingRun::report(int64_t step, const StepValues& values, double learning_rate) {
  if (!logged(step)) {
    logger_->step_done(step);
    return;
  }
  StepMetrics known;
  known.step = step;
  known.total_steps = c_.tokens.train_steps;
  known.learning_rate = learning_rate;
  known.consumed_tokens = summary_.consumed_tokens;
  known.skipped_steps = nonfinite_.skipped_steps();
  SaveCost save_cost;
  if (s_.checkpoint->take_save_cost(save_cost)) known.checkpoint = save_cost;
  if (s_.is_logging_rank()) {
    const data::DataLoaderState position = s_.data->state(step);
    for (const auto& dataset : position.stages[s_.data->stage_index(step)].datasets)
      known.dataset_samples.emplace_back(dataset.folder, dataset.consumed_samples);
  }
  logger_->queue(std::move(known), at::cat({values.losses, values.norm.to(at::kFloat).reshape({1})}));
}

void TrainingRun::validate(int64_t step) {
  if (!validation_.due(step)) return;
  logger_->flush();  // the step's line is made before: its rate holds no validation time
  const ValidationMetrics metrics = validation_.evaluate(step);
  reporter_.validated(metrics);
  summary_.validation_losses.emplace_back(step, metrics.loss);
  logger_->restart_interval(step);  // nor does the next line's
}

bool TrainingRun::save_or_stop(int64_t step, const StepValues& values) {
  s_.checkpoint->complete_if_written();  // a background save becomes latest at the first boundary after its writes
  const bool due = s_.checkpoint->due(step);
  // Every rank stops at the same step when any of them got a preemption signal.
  const int stop_signal = c_.general.preemption_signals.empty()
                              ? 0
                              : static_cast<int>(world_reduce(s_.communicator, preemption::signal_received(),
                                                              TRIAX_REDUCE_MAX));
  if (!due && stop_signal == 0) return false;
  logger_->flush();                                             // logged, and checked, before it is saved
  if (!logged(step)) nonfinite_.check(step, values.losses[0], values.norm);  // never save a diverged model
  s_.checkpoint->save(step, summary_.consumed_tokens, s_.resume.lr_scheduler, resolved_config_);
  logger_->restart_interval(step);  // the save's time is not a step's
  if (stop_signal == 0) return false;
  s_.checkpoint->finish_saves();
  summary_.preempted_by = preemption::signal_name(stop_signal);
  log::warning("preempted by " + summary_.preempted_by + ": stopped after step " + std::to_string(step) +
               " with a checkpoint in " + c_.checkpoints.checkpoints_path +
               " (resume with checkpoints.resume_checkpoint_path=" + c_.checkpoints.checkpoints_path + ")");
  return true;
}

bool TrainingRun::logged(int64_t step) const {
  return step % c_.logging.iteration_step_info_interval == 0 || step == c_.tokens.train_steps;
}

void TrainingRun::finish() {
  logger_->flush();
  summary_.skipped_steps = nonfinite_.skipped_steps();
  profiler_.finish();
  const int64_t world_size = s_.communicator.size(TRIAX_GROUP_WORLD);
  reporter_.finish({c_.model.plugin, s_.model->total_parameters(), device_display_name(s_.device), world_size,
                    s_.tokens_per_step()});
  for (size_t i = 0; i < losses_.size(); ++i) {
    summary_.losses.push_back(losses_[i].item<double>());
    summary_.grad_norms.push_back(norms_[i].item<double>());
  }
  summary_.seconds = logger_->elapsed_seconds();
  if (summary_.losses.empty()) return;
  const int64_t in_flight = c_.tokens.batch_accumulation_per_replica * s_.model->chunk_count();
  log::info("done: " + std::to_string(c_.tokens.train_steps) + " steps in " + format_duration(summary_.seconds) +
            ", loss " + std::to_string(summary_.losses.front()) + " -> " + std::to_string(summary_.losses.back()) +
            "; at most " + std::to_string(summary_.peak_live_micro_batches) + " of " + std::to_string(in_flight) +
            (s_.model->chunk_count() > 1 ? " (micro-batch, model chunk) pairs" : " micro-batches") +
            " in flight on this rank (" + c_.parallelism.pp_engine + ")");
}

}  // namespace triax
