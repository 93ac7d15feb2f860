#include "triax/pipeline_stage.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "triax/device_wait.hpp"
#include "triax/error.hpp"
#include "triax/trace_range.hpp"

namespace triax {
namespace {

bool carries_gradient(const at::Tensor& tensor) { return PipelineChannel::carries_gradient(tensor); }

std::string pass_name(int chunk, int index) {
  return "micro-batch " + std::to_string(index) + " of chunk " + std::to_string(chunk);
}

// Takes the entry of `key` out of `map`; `what` names what was expected, for the error.
template <class Map>
typename Map::mapped_type take(Map& map, const typename Map::key_type& key, const std::string& what) {
  auto it = map.find(key);
  if (it == map.end()) throw Error("pipeline: " + what + " of " + pass_name(key.first, key.second) + " is missing");
  auto value = std::move(it->second);
  map.erase(it);
  return value;
}

}  // namespace

template <class Work>
void PipelineStage::timed(triax_pass_kind kind, int chunk, int index, Work&& work) {
  if (!request_.records_passes()) return work();
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  work();
  wait_for_device(device_);
  request_.pass_timed(kind, chunk, index, std::chrono::duration<double>(Clock::now() - start).count());
}

PipelineStage::PipelineStage(const EngineContext& context, const StepRequest& request, PipelineStageOptions options)
    : request_(request),
      pp_rank_(context.pp_rank),
      pp_size_(context.pp_size),
      options_(options),
      device_(c10::kCPU),
      channel_(context.host) {}

int PipelineStage::virtual_stage(int chunk) const {
  if (chunk < 0 || chunk >= chunk_count())
    throw Error("pipeline: chunk " + std::to_string(chunk) + " of a rank holding " + std::to_string(chunk_count()));
  return virtual_stage_of(options_.placement, pp_size_, pp_rank_, chunk);
}

TensorPointer PipelineStage::previous(int chunk) const {
  if (is_first(chunk)) throw Error("pipeline: the first virtual stage has no previous stage");
  return {holder_of(virtual_stage(chunk) - 1).pp_rank};
}

TensorPointer PipelineStage::next(int chunk) const {
  if (is_last(chunk)) throw Error("pipeline: the last virtual stage has no next stage");
  return {holder_of(virtual_stage(chunk) + 1).pp_rank};
}

std::vector<at::Tensor> PipelineStage::receive_boundary(int chunk, int index) {
  const TensorPointer from = previous(chunk);
  if (from.pp_rank != pp_rank_) return channel_.receive_activations(from, device_);
  return take(handed_inputs_, Key{chunk, index}, "the input handed over by the chunk before");
}

void PipelineStage::send_boundary(int chunk, int index, const std::vector<at::Tensor>& boundary) {
  const TensorPointer to = next(chunk);
  if (to.pp_rank != pp_rank_) return channel_.send_activations(boundary, to);
  // A hand-over between two chunks of this rank gets copies, as a transfer would make.
  std::vector<at::Tensor> copies;
  for (const at::Tensor& tensor : boundary) copies.push_back(tensor.detach().clone());
  handed_inputs_.emplace(Key{holder_of(virtual_stage(chunk) + 1).chunk, index}, std::move(copies));
}

void PipelineStage::forward(int chunk, int index) {
  if (!is_first(chunk)) receive_input(chunk, index);
  run_forward(chunk, index);
  if (!is_last(chunk)) send_output(chunk, index);
}

void PipelineStage::backward(int chunk, int index) {
  if (!is_last(chunk)) receive_output_gradient(chunk, index);
  run_backward(chunk, index);
  if (!is_first(chunk)) send_input_gradient(chunk, index);
}

void PipelineStage::backward_input(int chunk, int index) {
  if (!is_last(chunk)) receive_output_gradient(chunk, index);
  run_backward_input(chunk, index);
  if (!is_first(chunk)) send_input_gradient(chunk, index);
}

void PipelineStage::evaluate(int chunk, int index) {
  const at::NoGradGuard no_grad;
  const TraceRange range("evaluate " + pass_name(chunk, index));
  StageInput input = request_.micro_batch(index);
  device_ = input.input_ids.defined() ? input.input_ids.device() : device_;
  if (!is_first(chunk)) {
    input.boundary_in = receive_boundary(chunk, index);
    input.hidden_in = input.boundary_in.front();
  }
  const StageOutput output = request_.model(chunk).forward(input);
  if (is_last(chunk)) {
    if (!output.loss.defined()) throw Error("pipeline: the model returned no loss on the last pipeline stage");
    losses_.push_back(output.loss.detach());
    return;
  }
  const std::vector<at::Tensor> boundary = output.boundary();
  if (boundary.empty()) throw Error("pipeline: the model returned no hidden_out on a stage before the last");
  send_boundary(chunk, index, boundary);
}

void PipelineStage::receive_input(int chunk, int index) {
  const Key key{chunk, index};
  if (live_.count(key) || inputs_.count(key)) throw Error("pipeline: " + pass_name(chunk, index) + " came twice");
  StageInput input = request_.micro_batch(index);
  device_ = input.input_ids.defined() ? input.input_ids.device() : device_;
  // The received tensors are leaves of this stage's graph; their gradients go back.
  timed(TRIAX_PASS_RECEIVE_INPUT, chunk, index, [&] { input.boundary_in = receive_boundary(chunk, index); });
  for (at::Tensor& tensor : input.boundary_in)
    if (carries_gradient(tensor)) tensor.requires_grad_(true);
  input.hidden_in = input.boundary_in.front();
  inputs_.emplace(key, std::move(input));
}

void PipelineStage::run_forward(int chunk, int index) {
  timed(TRIAX_PASS_FORWARD, chunk, index, [&] { compute_forward(chunk, index); });
}

void PipelineStage::compute_forward(int chunk, int index) {
  const Key key{chunk, index};
  if (live_.count(key) || awaiting_weights_.count(key))
    throw Error("pipeline: " + pass_name(chunk, index) + " was forwarded twice");
  const TraceRange range("forward " + pass_name(chunk, index));
  StageInput input = is_first(chunk) ? request_.micro_batch(index) : take(inputs_, key, "the received input");
  device_ = input.input_ids.defined() ? input.input_ids.device() : device_;
  if (options_.split_backward) {
    auto& queue = weight_gradients_[key] = std::make_unique<WeightGradientQueue>();
    input.weight_gradients = queue->c_queue();
  }
  InFlight flight;
  flight.boundary_in = input.boundary_in;
  StageOutput output = request_.model(chunk).forward(input);
  // Each micro-batch contributes 1/count of the step's mean loss. Auxiliary losses (MoE
  // balance) may come from any stage and join that stage's backward.
  const double share = 1.0 / request_.micro_batches();
  flight.objective = aux_losses_.add(output, share);
  if (is_last(chunk)) {
    if (!output.loss.defined()) throw Error("pipeline: the model returned no loss on the last pipeline stage");
    flight.objective = flight.objective.defined() ? flight.objective + output.loss * share : output.loss * share;
    losses_.push_back(output.loss.detach());
  } else {
    flight.boundary_out = output.boundary();
    if (flight.boundary_out.empty())
      throw Error("pipeline: the model returned no hidden_out on a stage before the last");
    outputs_.emplace(key, flight.boundary_out);
  }
  live_.emplace(key, std::move(flight));
  peak_live_ = std::max(peak_live_, live_micro_batches());
}

void PipelineStage::send_output(int chunk, int index) {
  std::vector<at::Tensor> output = take(outputs_, Key{chunk, index}, "the output to send");
  timed(TRIAX_PASS_SEND_OUTPUT, chunk, index, [&] { send_boundary(chunk, index, output); });
}

void PipelineStage::receive_output_gradient(int chunk, int index) {
  const Key key{chunk, index};
  auto it = live_.find(key);
  if (it == live_.end())
    throw Error("pipeline: a gradient for " + pass_name(chunk, index) + ", which is not in flight");
  const TensorPointer from = next(chunk);
  timed(TRIAX_PASS_RECEIVE_GRADIENT, chunk, index, [&] {
    output_gradients_[key] = from.pp_rank != pp_rank_
                                 ? channel_.receive_gradients(it->second.boundary_out, from)
                                 : take(handed_gradients_, key, "the gradient handed back by the chunk after");
  });
}

void PipelineStage::run_backward(int chunk, int index) {
  timed(TRIAX_PASS_BACKWARD, chunk, index, [&] {
    compute_backward_input(chunk, index);
    compute_backward_weight(chunk, index);
  });
}

void PipelineStage::run_backward_input(int chunk, int index) {
  timed(TRIAX_PASS_BACKWARD_INPUT, chunk, index, [&] { compute_backward_input(chunk, index); });
}

void PipelineStage::run_backward_weight(int chunk, int index) {
  timed(TRIAX_PASS_BACKWARD_WEIGHT, chunk, index, [&] { compute_backward_weight(chunk, index); });
}

void PipelineStage::compute_backward_input(int chunk, int index) {
  const Key key{chunk, index};
  InFlight flight = take(live_, key, "backward: the forward");  // frees the activations at the end
  const TraceRange range("backward " + pass_name(chunk, index));
  std::vector<at::Tensor> roots, seeds;
  if (!is_last(chunk)) {
    const std::vector<at::Tensor> gradients = take(output_gradients_, key, "the received output gradient");
    size_t g = 0;
    for (const at::Tensor& output : flight.boundary_out) {
      if (!carries_gradient(output)) continue;
      if (output.requires_grad()) {  // an output that depends on nothing trainable takes no gradient
        roots.push_back(output);
        seeds.push_back(gradients[g]);
      }
      ++g;
    }
  }
  if (flight.objective.defined()) {
    roots.push_back(flight.objective);
    seeds.push_back(at::ones_like(flight.objective));
  }
  if (!roots.empty()) torch::autograd::backward(roots, seeds);
  if (!is_first(chunk)) {
    std::vector<at::Tensor> gradients;
    for (const at::Tensor& input : flight.boundary_in) {
      if (!carries_gradient(input)) continue;
      at::Tensor gradient = input.grad();
      gradients.push_back(gradient.defined() ? gradient : at::zeros_like(input));  // an input this stage ignored
    }
    input_gradients_.emplace(key, std::move(gradients));
  }
  awaiting_weights_.insert(key);
}

void PipelineStage::compute_backward_weight(int chunk, int index) {
  const Key key{chunk, index};
  if (!awaiting_weights_.erase(key))
    throw Error("pipeline: the weight gradients of " + pass_name(chunk, index) + " before its backward input");
  auto queue = weight_gradients_.find(key);
  if (queue != weight_gradients_.end()) {
    const TraceRange range("backward weights " + pass_name(chunk, index));
    queue->second->run();
    weight_gradients_.erase(queue);
  }
  request_.after_backward(chunk, index);
}

void PipelineStage::send_input_gradient(int chunk, int index) {
  std::vector<at::Tensor> gradients = take(input_gradients_, Key{chunk, index}, "the input gradient to send");
  const TensorPointer to = previous(chunk);
  timed(TRIAX_PASS_SEND_GRADIENT, chunk, index, [&] {
    if (to.pp_rank != pp_rank_) return channel_.send_gradients(gradients, to);
    handed_gradients_.emplace(Key{holder_of(virtual_stage(chunk) - 1).chunk, index}, std::move(gradients));
  });
}

void PipelineStage::check_nothing_left() const {
  if (!awaiting_weights_.empty()) {
    const Key& first = *awaiting_weights_.begin();
    throw Error("pipeline: the step ended with the weight gradients of " + std::to_string(awaiting_weights_.size()) +
                " (chunk, micro-batch) pairs never computed, " + pass_name(first.first, first.second) +
                " first: the schedule ran their backward_input without their backward_weight");
  }
  if (!live_.empty())
    throw Error("pipeline: the step ended with " + std::to_string(live_.size()) + " micro-batches still in flight");
  if (!inputs_.empty() || !outputs_.empty() || !output_gradients_.empty() || !input_gradients_.empty() ||
      !handed_inputs_.empty() || !handed_gradients_.empty())
    throw Error("pipeline: the step ended with transfers left over (a schedule that sends or receives too little)");
}

StepResult PipelineStage::finish() {
  check_nothing_left();
  StepResult result;
  result.peak_live_micro_batches = peak_live_;
  if (!losses_.empty()) result.loss = at::stack(losses_).mean();
  aux_losses_.finish(result, request_.micro_batches());
  return result;
}

}  // namespace triax
