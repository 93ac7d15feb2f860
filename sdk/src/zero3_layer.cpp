// A ZeRO-3 block as a custom autograd function whose forward and backward gather the block's
// parameters, modelled on recompute.cpp (the backward runs the block again).
#include "triax/layers/zero3_layer.hpp"

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

// Frees a unit's gathered parameters when the scope ends, also on an exception.
class GatheredScope {
 public:
  explicit GatheredScope(Zero3Unit& unit) : unit_(unit) { unit_.gather(); }
  ~GatheredScope() { unit_.release(); }
  GatheredScope(const GatheredScope&) = delete;
  GatheredScope& operator=(const GatheredScope&) = delete;

 private:
  Zero3Unit& unit_;
};

// The block with its undefined outputs left out: autograd functions return defined tensors.
// The first run records which outputs are defined; a re-run must define the same ones.
struct DefinedOutputs {
  RecomputedBlock block;
  std::vector<bool> defined;

  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) {
    std::vector<at::Tensor> all = block(inputs);
    if (defined.empty())
      for (const at::Tensor& t : all) defined.push_back(t.defined());
    if (all.size() != defined.size())
      throw Error(TRIAX_ERROR_RUNTIME, "zero3: the block returned " + std::to_string(all.size()) +
                                           " outputs when run again, " + std::to_string(defined.size()) +
                                           " the first time");
    std::vector<at::Tensor> kept;
    for (size_t i = 0; i < all.size(); ++i)
      if (defined[i]) kept.push_back(all[i]);
    return kept;
  }
};

struct Zero3Record : torch::CustomClassHolder {
  std::shared_ptr<Zero3Unit> unit, prefetch_forward, prefetch_backward;
  DefinedOutputs block;
  GeneratorStates generators;
  size_t input_count = 0;
};

struct Zero3Function : torch::autograd::Function<Zero3Function> {
  // The shards are arguments for their gradients only: the unit reads them.
  static variable_list forward(AutogradContext* ctx, at::TensorList inputs, at::TensorList /*shards*/,
                               const c10::intrusive_ptr<Zero3Record>& record) {
    ctx->save_for_backward(inputs.vec());
    ctx->saved_data["record"] = c10::IValue::make_capsule(record);
    record->generators = GeneratorStates::capture(inputs.vec());
    std::vector<at::Tensor> outputs;
    {
      GatheredScope gathered(*record->unit);
      if (record->prefetch_forward) record->prefetch_forward->start_gather();
      outputs = record->block.run(inputs.vec());
    }
    for (const at::Tensor& output : outputs)
      if (!at::isFloatingType(output.scalar_type()) && !at::isComplexType(output.scalar_type()))
        ctx->mark_non_differentiable({output});
    return outputs;
  }

  static variable_list backward(AutogradContext* ctx, variable_list output_grads) {
    auto record = c10::static_intrusive_pointer_cast<Zero3Record>(ctx->saved_data["record"].toCapsule());
    const variable_list saved = ctx->get_saved_variables();
    const size_t input_count = record->input_count;
    Zero3Unit& unit = *record->unit;
    const std::vector<at::Tensor> wholes = unit.wholes();

    std::vector<at::Tensor> inputs(saved.begin(), saved.end());
    for (size_t i = 0; i < input_count; ++i)
      if (inputs[i].defined()) inputs[i] = inputs[i].detach().requires_grad_(ctx->needs_input_grad(i));

    variable_list grads(input_count + wholes.size() + 1);  // + the record, which takes no gradient
    std::vector<at::Tensor> whole_grads(wholes.size());
    {
      GatheredScope gathered(unit);
      if (record->prefetch_backward) record->prefetch_backward->start_gather();
      std::vector<at::Tensor> outputs;
      {
        ReplayedGenerators replay(record->generators);
        at::AutoGradMode grad_on(true);
        // The reduce-scatter below needs every weight gradient now: none is deferred.
        const WeightGradientDeferral no_deferral(nullptr);
        outputs = record->block.run(inputs);
      }
      variable_list roots, root_grads;
      for (size_t i = 0; i < outputs.size() && i < output_grads.size(); ++i)
        if (outputs[i].requires_grad() && output_grads[i].defined()) {
          roots.push_back(outputs[i]);
          root_grads.push_back(output_grads[i]);
        }
      variable_list targets;
      std::vector<size_t> input_slots;
      for (size_t i = 0; i < input_count; ++i)
        if (inputs[i].defined() && inputs[i].requires_grad()) {
          targets.push_back(inputs[i]);
          input_slots.push_back(i);
        }
      for (const at::Tensor& whole : wholes) targets.push_back(whole);
      if (!roots.empty()) {
        variable_list target_grads = torch::autograd::grad(roots, targets, root_grads, /*retain_graph=*/false,
                                                           /*create_graph=*/false, /*allow_unused=*/true);
        for (size_t k = 0; k < input_slots.size(); ++k) grads[input_slots[k]] = target_grads[k];
        for (size_t k = 0; k < wholes.size(); ++k) whole_grads[k] = target_grads[input_slots.size() + k];
      }
    }
    // Every rank of the group reduce-scatters, also one whose block got no gradient (zeros).
    std::vector<at::Tensor> shard_grads = unit.reduce_scatter(whole_grads);
    for (size_t k = 0; k < shard_grads.size(); ++k) grads[input_count + k] = shard_grads[k];
    return grads;
  }
};

}  // namespace

std::vector<at::Tensor> zero3_run(const std::shared_ptr<Zero3Unit>& unit, const RecomputedBlock& block,
                                  const std::vector<at::Tensor>& inputs,
                                  const std::shared_ptr<Zero3Unit>& prefetch_forward,
                                  const std::shared_ptr<Zero3Unit>& prefetch_backward) {
  if (!unit || !block) throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "zero3: no unit or no block to run");
  // Values the block's modules set beside its outputs (a router's losses) leave the function as
  // outputs too, or they would have no graph (triax/layers/side_outputs.hpp).
  const SideOutputCarrier side_outputs;
  auto record = c10::make_intrusive<Zero3Record>();
  record->unit = unit;
  record->prefetch_forward = prefetch_forward;
  record->prefetch_backward = prefetch_backward;
  record->block.block = side_outputs.wrap(block);
  record->input_count = inputs.size();
  const std::vector<at::Tensor> shards = unit->shards();
  std::vector<at::Tensor> kept = Zero3Function::apply(at::TensorList(inputs), at::TensorList(shards), record);
  std::vector<at::Tensor> outputs;
  size_t next = 0;
  for (bool defined : record->block.defined) outputs.push_back(defined ? kept[next++] : at::Tensor());
  return side_outputs.deliver(std::move(outputs));
}

}  // namespace triax
