// Activation recomputation as a custom autograd function whose backward re-runs the block.
#include "triax/layers/recompute.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <string>
#include <utility>

#include "generator_states.hpp"
#include "triax/error.hpp"
#include "triax/layers/deferred_weight_gradients.hpp"
#include "triax/layers/side_outputs.hpp"

namespace triax {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What the backward needs besides the saved tensors. AutogradContext keeps non-tensor state as
// IValues: a capsule is the IValue that holds an arbitrary C++ object.
struct BlockRecord : torch::CustomClassHolder {
  RecomputedBlock block;
  GeneratorStates generators;
  size_t input_count = 0;
  // The forward's deferral of weight gradients, in effect again when the block runs in backward.
  const triax_weight_gradient_queue* weight_gradients = nullptr;
};

struct RecomputeFunction : torch::autograd::Function<RecomputeFunction> {
  // Runs with autograd off (Function::apply): no graph, no saved activations inside the block.
  static variable_list forward(AutogradContext* ctx, at::TensorList inputs, at::TensorList parameters,
                               const c10::intrusive_ptr<BlockRecord>& record) {
    std::vector<at::Tensor> saved = inputs.vec();
    saved.insert(saved.end(), parameters.begin(), parameters.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["record"] = c10::IValue::make_capsule(record);

    record->generators = GeneratorStates::capture(inputs.vec());
    std::vector<at::Tensor> outputs = record->block(inputs.vec());
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!outputs[i].defined())
        throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                    "recompute: the block's output " + std::to_string(i) + " is undefined");
      if (!at::isFloatingType(outputs[i].scalar_type()) && !at::isComplexType(outputs[i].scalar_type()))
        ctx->mark_non_differentiable({outputs[i]});
    }
    return outputs;
  }

  static variable_list backward(AutogradContext* ctx, variable_list output_grads) {
    auto record = c10::static_intrusive_pointer_cast<BlockRecord>(ctx->saved_data["record"].toCapsule());
    const variable_list saved = ctx->get_saved_variables();
    const size_t input_count = record->input_count;

    // Fresh leaves for the inputs: the re-run's graph ends at them, not at the outer graph.
    std::vector<at::Tensor> inputs(saved.begin(), saved.begin() + static_cast<std::ptrdiff_t>(input_count));
    for (size_t i = 0; i < input_count; ++i)
      if (inputs[i].defined()) inputs[i] = inputs[i].detach().requires_grad_(ctx->needs_input_grad(i));

    std::vector<at::Tensor> outputs;
    {
      ReplayedGenerators replay(record->generators);
      at::AutoGradMode grad_on(true);
      const WeightGradientDeferral deferral(record->weight_gradients);
      outputs = record->block(inputs);
    }
    if (outputs.size() != output_grads.size())
      throw Error(TRIAX_ERROR_RUNTIME, "recompute: the block returned " + std::to_string(outputs.size()) +
                                           " outputs when run again, " + std::to_string(output_grads.size()) +
                                           " the first time");

    variable_list roots, root_grads;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (outputs[i].requires_grad() && output_grads[i].defined()) {
        roots.push_back(outputs[i]);
        root_grads.push_back(output_grads[i]);
      }
    }
    // What the outer backward asked for: inputs first, then parameters (edge order of apply).
    variable_list targets;
    std::vector<size_t> target_slots;
    for (size_t i = 0; i < saved.size(); ++i) {
      const at::Tensor& target = i < input_count ? inputs[i] : saved[i];
      if (target.defined() && target.requires_grad() && ctx->needs_input_grad(i)) {
        targets.push_back(target);
        target_slots.push_back(i);
      }
    }

    variable_list grads(saved.size() + 1);  // + the record argument, which takes no gradient
    if (roots.empty() || targets.empty()) return grads;
    variable_list target_grads = torch::autograd::grad(roots, targets, root_grads, /*retain_graph=*/false,
                                                       /*create_graph=*/false, /*allow_unused=*/true);
    for (size_t k = 0; k < target_slots.size(); ++k) grads[target_slots[k]] = target_grads[k];
    return grads;
  }
};

}  // namespace

std::vector<at::Tensor> recompute(const RecomputedBlock& block, const std::vector<at::Tensor>& inputs,
                                  const std::vector<at::Tensor>& parameters) {
  if (!block) throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "recompute: no block to run");
  for (size_t i = 0; i < parameters.size(); ++i)
    if (!parameters[i].defined())
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "recompute: parameter " + std::to_string(i) + " is undefined");
  // Values the block's modules set beside its outputs (a router's losses) leave the function as
  // outputs too, or they would have no graph (triax/layers/side_outputs.hpp).
  const SideOutputCarrier side_outputs;
  auto record = c10::make_intrusive<BlockRecord>();
  record->block = side_outputs.wrap(block);
  record->input_count = inputs.size();
  record->weight_gradients = WeightGradientDeferral::current();
  return side_outputs.deliver(RecomputeFunction::apply(at::TensorList(inputs), at::TensorList(parameters), record));
}

at::Tensor recompute(const std::function<at::Tensor(const std::vector<at::Tensor>& inputs)>& block,
                     const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& parameters) {
  if (!block) throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "recompute: no block to run");
  RecomputedBlock wrapped = [block](const std::vector<at::Tensor>& in) { return std::vector<at::Tensor>{block(in)}; };
  return recompute(wrapped, inputs, parameters).front();
}

}  // namespace triax
