// CausalLm with optimizer.zero_stage 3: its parameters become ZeRO-3 shards once initialised, and
// the embedding, every layer and the head run as blocks that gather their parameters around each
// forward and backward (triax/layers/zero3_layer.hpp), each prefetching the next block's gather.
#include <ATen/ATen.h>

#include <algorithm>

#include "triax/causal_lm.hpp"
#include "triax/error.hpp"
#include "triax/layers/zero3_layer.hpp"
#include "triax/trace_range.hpp"

namespace triax {

// The units in forward order: the embedding (on the first stage), the layers, the head (on the
// last); a block prefetches the next unit's gather in forward and the previous one's in backward.
struct CausalLm::Zero3Blocks {
  std::unique_ptr<Zero3Parameters> parameters;
  std::vector<std::shared_ptr<Zero3Unit>> order;
  int embedding = -1, first_layer = -1, head = -1;  // positions in order

  std::shared_ptr<Zero3Unit> at(int position) const {
    return position >= 0 && position < static_cast<int>(order.size()) ? order[static_cast<size_t>(position)] : nullptr;
  }
  std::vector<at::Tensor> run(int position, const RecomputedBlock& block, const std::vector<at::Tensor>& inputs) const {
    return zero3_run(at(position), block, inputs, at(position + 1), at(position - 1));
  }
};

namespace {

std::vector<at::Tensor> parameters_of(const std::vector<torch::nn::Module*>& modules) {
  std::vector<at::Tensor> parameters;
  for (torch::nn::Module* module : modules)
    if (module != nullptr)
      for (const at::Tensor& p : module->parameters()) parameters.push_back(p);
  return parameters;
}

}  // namespace

void CausalLm::prepare_parameters() {
  if (context_.zero_stage != 3) return;
  if (zero3_) throw Error(layout_.model_name + ": prepare_parameters called twice");
  auto blocks = std::make_shared<Zero3Blocks>();
  blocks->parameters = std::make_unique<Zero3Parameters>(parameter_table(), context_);
  std::vector<at::Tensor> covered;
  auto add = [&](const std::vector<at::Tensor>& parameters) {
    blocks->order.push_back(blocks->parameters->unit(parameters));
    covered.insert(covered.end(), parameters.begin(), parameters.end());
    return static_cast<int>(blocks->order.size()) - 1;
  };
  if (embeds_tokens_) blocks->embedding = add(parameters_of({embedding_.get(), position_embedding_.get()}));
  for (const auto& layer : layers_) {
    const int position = add(layer->parameters());
    if (blocks->first_layer < 0) blocks->first_layer = position;
  }
  if (head_) {
    std::vector<at::Tensor> head = parameters_of({norm_.module.get()});
    // A tied head computes with the embedding's weight, which it does not register.
    head.push_back(head_->weight);
    blocks->head = add(head);
  }
  // Every parameter must belong to a block, or its whole values would never be gathered.
  for (const at::Tensor& p : parameters())
    if (std::none_of(covered.begin(), covered.end(), [&](const at::Tensor& c) { return c.is_same(p); }))
      throw Error(TRIAX_ERROR_UNSUPPORTED, layout_.model_name +
                                               ": with optimizer.zero_stage 3 every parameter must belong to the "
                                               "embedding, a layer or the head");
  zero3_ = std::move(blocks);
}

at::Tensor CausalLm::zero3_embedding(const at::Tensor& ids) const {
  VocabParallelEmbedding* embedding = embedding_.get();
  PositionEmbedding* positions = position_embedding_.get();
  auto block = [embedding, positions](const std::vector<at::Tensor>& in) {
    at::Tensor tokens = embedding->forward(in[0]);
    if (positions != nullptr) {
      const auto options = at::TensorOptions().dtype(at::kLong).device(in[0].device());
      tokens = tokens + positions->forward(at::arange(in[0].size(1), options).unsqueeze(0));
    }
    return std::vector<at::Tensor>{tokens};
  };
  return zero3_->run(zero3_->embedding, block, {ids}).front();
}

at::Tensor CausalLm::zero3_layers(const at::Tensor& hidden, const std::vector<at::Tensor>& shared) {
  int64_t layer_index = std::max(context_.first_block, 1) - 1;  // of the model, for profiler ranges
  at::Tensor stream = hidden;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const TraceRange range("block layer " + std::to_string(layer_index++));
    CausalLmLayer* layer = layers_[i].get();
    std::vector<at::Tensor> inputs{stream};
    inputs.insert(inputs.end(), shared.begin(), shared.end());
    stream = zero3_
                 ->run(
                     zero3_->first_layer + static_cast<int>(i),
                     [layer](const std::vector<at::Tensor>& in) {
                       return std::vector<at::Tensor>{
                           layer->forward(in[0], std::vector<at::Tensor>(in.begin() + 1, in.end()))};
                     },
                     inputs)
                 .front();
  }
  return stream;
}

StageOutput CausalLm::zero3_head_output(const at::Tensor& hidden, const StageInput& input) {
  auto block = [this, input](const std::vector<at::Tensor>& in) {
    StageOutput output = head_output(in[0], input);
    auto z_loss = output.aux_losses.find("z_loss");
    return std::vector<at::Tensor>{output.loss, output.logits,
                                   z_loss != output.aux_losses.end() ? z_loss->second : at::Tensor()};
  };
  const std::vector<at::Tensor> outputs = zero3_->run(zero3_->head, block, {hidden});
  StageOutput output;
  output.loss = outputs[0];
  output.logits = outputs[1];
  if (outputs[2].defined()) output.aux_losses["z_loss"] = outputs[2];
  return output;
}

}  // namespace triax
