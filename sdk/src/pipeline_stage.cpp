#include "triax/pipeline_stage.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include "triax/error.hpp"

namespace triax {
namespace {

// Header of an activation: dtype, rank, then the sizes (unused ones 0).
constexpr int64_t kHeaderLength = 2 + TRIAX_MAX_TENSOR_DIMS;

}  // namespace

void PipelineChannel::send_activation(const at::Tensor& activation, TensorPointer to) const {
  if (activation.dim() > TRIAX_MAX_TENSOR_DIMS)
    throw Error("pipeline: an activation of " + std::to_string(activation.dim()) + " dimensions cannot be sent");
  at::Tensor header = at::zeros({kHeaderLength}, at::kLong);
  auto h = header.accessor<int64_t, 1>();
  h[0] = static_cast<int64_t>(activation.scalar_type());
  h[1] = activation.dim();
  for (int64_t d = 0; d < activation.dim(); ++d) h[2 + d] = activation.size(d);
  host_.send(TRIAX_GROUP_PP, header.to(activation.device()), to.pp_rank);
  host_.send(TRIAX_GROUP_PP, activation.detach().contiguous(), to.pp_rank);
}

at::Tensor PipelineChannel::receive_activation(TensorPointer from, c10::Device device) const {
  at::Tensor header = at::empty({kHeaderLength}, at::TensorOptions().dtype(at::kLong).device(device));
  host_.recv(TRIAX_GROUP_PP, header, from.pp_rank);
  header = header.cpu();
  auto h = header.accessor<int64_t, 1>();
  if (h[1] < 0 || h[1] > TRIAX_MAX_TENSOR_DIMS)
    throw Error("pipeline: a malformed activation header came from pipeline rank " + std::to_string(from.pp_rank));
  std::vector<int64_t> sizes(h.data() + 2, h.data() + 2 + h[1]);
  at::Tensor activation =
      at::empty(sizes, at::TensorOptions().dtype(static_cast<c10::ScalarType>(h[0])).device(device));
  host_.recv(TRIAX_GROUP_PP, activation, from.pp_rank);
  return activation;
}

void PipelineChannel::send_gradient(const at::Tensor& gradient, TensorPointer to) const {
  host_.send(TRIAX_GROUP_PP, gradient.contiguous(), to.pp_rank);
}

at::Tensor PipelineChannel::receive_gradient(const at::Tensor& activation, TensorPointer from) const {
  at::Tensor gradient = at::empty_like(activation, at::MemoryFormat::Contiguous);
  host_.recv(TRIAX_GROUP_PP, gradient, from.pp_rank);
  return gradient;
}

PipelineStage::PipelineStage(const EngineContext& context, const StepRequest& request)
    : request_(request), device_(c10::kCPU), channel_(context.host) {
  if (context.pp_rank > 0) previous_.pp_rank = context.pp_rank - 1;
  if (context.pp_rank < context.pp_size - 1) next_.pp_rank = context.pp_rank + 1;
}

void PipelineStage::forward(int index) {
  if (live_.count(index)) throw Error("pipeline: micro-batch " + std::to_string(index) + " was forwarded twice");
  StageInput input = request_.micro_batch(index);
  device_ = input.input_ids.defined() ? input.input_ids.device() : device_;
  InFlight flight;
  if (!is_first()) {
    // The received activation is a leaf of this stage's graph; its gradient goes back.
    flight.hidden_in = channel_.receive_activation(previous_, device_).requires_grad_(true);
    input.hidden_in = flight.hidden_in;
  }
  StageOutput output = request_.model().forward(input);
  // Each micro-batch contributes 1/count of the step's mean loss. Auxiliary losses (MoE
  // balance) may come from any stage and join that stage's backward.
  const double share = 1.0 / request_.micro_batches();
  flight.objective = aux_losses_.add(output, share);
  if (is_last()) {
    if (!output.loss.defined()) throw Error("pipeline: the model returned no loss on the last pipeline stage");
    flight.objective = flight.objective.defined() ? flight.objective + output.loss * share : output.loss * share;
    losses_.push_back(output.loss.detach());
  } else {
    if (!output.hidden_out.defined())
      throw Error("pipeline: the model returned no hidden_out on a stage before the last");
    flight.hidden_out = output.hidden_out;
    channel_.send_activation(output.hidden_out, next_);
  }
  live_.emplace(index, std::move(flight));
  peak_live_ = std::max(peak_live_, live_micro_batches());
}

void PipelineStage::backward(int index) {
  auto it = live_.find(index);
  if (it == live_.end())
    throw Error("pipeline: backward of micro-batch " + std::to_string(index) + ", which is not in flight");
  InFlight& flight = it->second;
  if (is_last()) {
    flight.objective.backward();
  } else {
    at::Tensor gradient = channel_.receive_gradient(flight.hidden_out, next_);
    if (flight.objective.defined())
      torch::autograd::backward({flight.hidden_out, flight.objective}, {gradient, at::ones_like(flight.objective)});
    else
      flight.hidden_out.backward(gradient);
  }
  if (!is_first()) {
    at::Tensor gradient = flight.hidden_in.grad();
    if (!gradient.defined()) gradient = at::zeros_like(flight.hidden_in);  // this stage ignored its input
    channel_.send_gradient(gradient, previous_);
  }
  live_.erase(it);  // frees this micro-batch's activations
  request_.after_backward(index);
}

StepResult PipelineStage::finish() {
  if (!live_.empty())
    throw Error("pipeline: the step ended with " + std::to_string(live_.size()) + " micro-batches still in flight");
  StepResult result;
  result.peak_live_micro_batches = peak_live_;
  if (!losses_.empty()) result.loss = at::stack(losses_).mean();
  aux_losses_.finish(result, request_.micro_batches());
  return result;
}

}  // namespace triax
