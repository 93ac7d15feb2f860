// Differentiable values a module computes beside its output, which the model collects after the
// forward: a MoE router's balance loss and z-loss, added to the objective.
//
// A module keeps such values in a SideOutput and sets them in its forward. That works as long as
// the forward builds the autograd graph. Runners that run a block's first forward without
// autograd and run it again in backward (recompute.hpp, zero3_layer.hpp) would leave the values
// without a graph. So they run the block through a SideOutputCarrier: the values set inside the
// block become extra outputs of the runner's autograd function. The carrier then puts those
// graph-connected outputs into the modules' SideOutputs. In the backward's re-run the values
// become roots of the re-run's graph with the gradients the outer backward gave them.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <vector>

#include "triax/layers/recompute.hpp"

namespace triax {

class SideOutput {
 public:
  // Whether values set now can reach a backward: autograd is on, or a runner carries them out.
  static bool wanted();
  // Hands `values` (all defined) to the innermost carrier running a block, or keeps them here.
  void set(std::vector<at::Tensor> values);
  // The values kept by the last set(), handed over once.
  std::optional<std::vector<at::Tensor>> take();

 private:
  std::optional<std::vector<at::Tensor>> values_;
};

// One block run by an autograd-function runner, with the side outputs its modules set.
class SideOutputCarrier {
 public:
  SideOutputCarrier();

  // `block` run so that what its modules set comes out after the block's own outputs, in the
  // order they were set. The first run fixes which modules set how many values; a re-run must set
  // the same (the block computes the same things from the same inputs).
  RecomputedBlock wrap(RecomputedBlock block) const;
  // The outputs of the wrapped block's autograd function: gives the side values to their modules'
  // SideOutputs and returns the block's own outputs.
  std::vector<at::Tensor> deliver(std::vector<at::Tensor> outputs) const;

 private:
  struct Record;
  std::shared_ptr<Record> record_;  // shared with the wrapped block, which the backward keeps
};

}  // namespace triax
