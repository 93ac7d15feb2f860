#include "triax/pipeline_stage.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <string>

#include "triax/error.hpp"
#include "triax/trace_range.hpp"

namespace triax {
namespace {

// Header of a boundary: the tensor count, then per tensor its dtype, rank and sizes (unused 0).
constexpr int64_t kTensorHeaderLength = 2 + TRIAX_MAX_TENSOR_DIMS;
constexpr int64_t kHeaderLength = 1 + TRIAX_MAX_BOUNDARY_TENSORS * kTensorHeaderLength;

// Only floating-point boundary tensors carry gradients back.
bool carries_gradient(const at::Tensor& tensor) { return at::isFloatingType(tensor.scalar_type()); }

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

void PipelineChannel::send_activations(const std::vector<at::Tensor>& activations, TensorPointer to) const {
  if (activations.empty() || static_cast<int64_t>(activations.size()) > TRIAX_MAX_BOUNDARY_TENSORS)
    throw Error("pipeline: a boundary carries 1 to " + std::to_string(TRIAX_MAX_BOUNDARY_TENSORS) + " tensors, not " +
                std::to_string(activations.size()));
  at::Tensor header = at::zeros({kHeaderLength}, at::kLong);
  auto h = header.accessor<int64_t, 1>();
  h[0] = static_cast<int64_t>(activations.size());
  for (size_t i = 0; i < activations.size(); ++i) {
    const at::Tensor& activation = activations[i];
    if (!activation.defined()) throw Error("pipeline: boundary tensor " + std::to_string(i) + " is undefined");
    if (activation.dim() > TRIAX_MAX_TENSOR_DIMS)
      throw Error("pipeline: an activation of " + std::to_string(activation.dim()) + " dimensions cannot be sent");
    const int64_t base = 1 + static_cast<int64_t>(i) * kTensorHeaderLength;
    h[base] = static_cast<int64_t>(activation.scalar_type());
    h[base + 1] = activation.dim();
    for (int64_t d = 0; d < activation.dim(); ++d) h[base + 2 + d] = activation.size(d);
  }
  host_.send(TRIAX_GROUP_PP, header.to(activations.front().device()), to.pp_rank);
  for (const at::Tensor& activation : activations)
    host_.send(TRIAX_GROUP_PP, activation.detach().contiguous(), to.pp_rank);
}

std::vector<at::Tensor> PipelineChannel::receive_activations(TensorPointer from, c10::Device device) const {
  at::Tensor header = at::empty({kHeaderLength}, at::TensorOptions().dtype(at::kLong).device(device));
  host_.recv(TRIAX_GROUP_PP, header, from.pp_rank);
  header = header.cpu();
  auto h = header.accessor<int64_t, 1>();
  const std::string malformed =
      "pipeline: a malformed activation header came from pipeline rank " + std::to_string(from.pp_rank);
  if (h[0] < 1 || h[0] > TRIAX_MAX_BOUNDARY_TENSORS) throw Error(malformed);
  std::vector<at::Tensor> activations;
  for (int64_t i = 0; i < h[0]; ++i) {
    const int64_t base = 1 + i * kTensorHeaderLength;
    if (h[base + 1] < 0 || h[base + 1] > TRIAX_MAX_TENSOR_DIMS) throw Error(malformed);
    std::vector<int64_t> sizes(h.data() + base + 2, h.data() + base + 2 + h[base + 1]);
    activations.push_back(
        at::empty(sizes, at::TensorOptions().dtype(static_cast<c10::ScalarType>(h[base])).device(device)));
  }
  for (at::Tensor& activation : activations) host_.recv(TRIAX_GROUP_PP, activation, from.pp_rank);
  return activations;
}

void PipelineChannel::send_gradients(const std::vector<at::Tensor>& gradients, TensorPointer to) const {
  for (const at::Tensor& gradient : gradients) host_.send(TRIAX_GROUP_PP, gradient.contiguous(), to.pp_rank);
}

std::vector<at::Tensor> PipelineChannel::receive_gradients(const std::vector<at::Tensor>& activations,
                                                           TensorPointer from) const {
  std::vector<at::Tensor> gradients;
  for (const at::Tensor& activation : activations) {
    if (!carries_gradient(activation)) continue;
    gradients.push_back(at::empty_like(activation, at::MemoryFormat::Contiguous));
    host_.recv(TRIAX_GROUP_PP, gradients.back(), from.pp_rank);
  }
  return gradients;
}

PipelineStage::PipelineStage(const EngineContext& context, const StepRequest& request)
    : request_(request),
      pp_rank_(context.pp_rank),
      pp_size_(context.pp_size),
      device_(c10::kCPU),
      channel_(context.host) {}

int PipelineStage::virtual_stage(int chunk) const {
  if (chunk < 0 || chunk >= chunk_count())
    throw Error("pipeline: chunk " + std::to_string(chunk) + " of a rank holding " + std::to_string(chunk_count()));
  return chunk * pp_size_ + pp_rank_;
}

TensorPointer PipelineStage::previous(int chunk) const {
  if (is_first(chunk)) throw Error("pipeline: the first virtual stage has no previous stage");
  return {(pp_rank_ + pp_size_ - 1) % pp_size_};
}

TensorPointer PipelineStage::next(int chunk) const {
  if (is_last(chunk)) throw Error("pipeline: the last virtual stage has no next stage");
  return {(pp_rank_ + 1) % pp_size_};
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

void PipelineStage::evaluate(int chunk, int index) {
  const at::NoGradGuard no_grad;
  const TraceRange range("evaluate " + pass_name(chunk, index));
  StageInput input = request_.micro_batch(index);
  device_ = input.input_ids.defined() ? input.input_ids.device() : device_;
  if (!is_first(chunk)) {
    input.boundary_in = channel_.receive_activations(previous(chunk), device_);
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
  channel_.send_activations(boundary, next(chunk));
}

void PipelineStage::receive_input(int chunk, int index) {
  const Key key{chunk, index};
  if (live_.count(key) || inputs_.count(key)) throw Error("pipeline: " + pass_name(chunk, index) + " came twice");
  StageInput input = request_.micro_batch(index);
  device_ = input.input_ids.defined() ? input.input_ids.device() : device_;
  // The received tensors are leaves of this stage's graph; their gradients go back.
  input.boundary_in = channel_.receive_activations(previous(chunk), device_);
  for (at::Tensor& tensor : input.boundary_in)
    if (carries_gradient(tensor)) tensor.requires_grad_(true);
  input.hidden_in = input.boundary_in.front();
  inputs_.emplace(key, std::move(input));
}

void PipelineStage::run_forward(int chunk, int index) {
  const Key key{chunk, index};
  if (live_.count(key)) throw Error("pipeline: " + pass_name(chunk, index) + " was forwarded twice");
  const TraceRange range("forward " + pass_name(chunk, index));
  StageInput input = is_first(chunk) ? request_.micro_batch(index) : take(inputs_, key, "the received input");
  device_ = input.input_ids.defined() ? input.input_ids.device() : device_;
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
  channel_.send_activations(take(outputs_, Key{chunk, index}, "the output to send"), next(chunk));
}

void PipelineStage::receive_output_gradient(int chunk, int index) {
  const Key key{chunk, index};
  auto it = live_.find(key);
  if (it == live_.end())
    throw Error("pipeline: a gradient for " + pass_name(chunk, index) + ", which is not in flight");
  output_gradients_[key] = channel_.receive_gradients(it->second.boundary_out, next(chunk));
}

void PipelineStage::run_backward(int chunk, int index) {
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
  request_.after_backward(chunk, index);
}

void PipelineStage::send_input_gradient(int chunk, int index) {
  channel_.send_gradients(take(input_gradients_, Key{chunk, index}, "the input gradient to send"), previous(chunk));
}

StepResult PipelineStage::finish() {
  if (!live_.empty())
    throw Error("pipeline: the step ended with " + std::to_string(live_.size()) + " micro-batches still in flight");
  if (!inputs_.empty() || !outputs_.empty() || !output_gradients_.empty() || !input_gradients_.empty())
    throw Error("pipeline: the step ended with transfers left over (a schedule that sends or receives too little)");
  StepResult result;
  result.peak_live_micro_batches = peak_live_;
  if (!losses_.empty()) result.loss = at::stack(losses_).mean();
  aux_losses_.finish(result, request_.micro_batches());
  return result;
}

}  // namespace triax
