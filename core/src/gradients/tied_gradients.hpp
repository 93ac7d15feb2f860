// Parameters tied across pipeline stages (TRIAX_PARAM_TIED: one logical parameter, such as an
// embedding shared with the lm_head, held by the first and the last stage): their gradients are
// summed over the stages holding them before the optimizer step, so every copy takes the same
// update and the copies stay equal.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "triax/parameter.hpp"

namespace triax {

class Communicator;

class TiedGradients {
 public:
  // Finds, with every rank of this rank's pipeline group, which pipeline ranks hold each tied
  // key. Collective over the pp group.
  TiedGradients(const std::vector<NamedParameter>& parameters, Communicator& communicator);

  // Sums the gradients of tied parameters over their holders. `gradients[i]` belongs to
  // parameters[i]. Collective over the holders (pairwise exchanges in one global order).
  void sum(const std::vector<at::Tensor>& gradients) const;

  // Whether this rank's copy of the parameter tied under `key` counts in the global gradient
  // norm: only the lowest pipeline rank holding it counts it, so that it is counted once.
  bool counts_in_norm(const std::string& key) const;

  bool empty() const { return ties_.empty(); }
  // Of each parameter: whether sum() changes its gradient.
  std::vector<bool> tied_parameters() const;
  // "model.embed_tokens.weight on pipeline ranks 0 and 3", for the start-up log.
  std::string describe() const;

 private:
  struct Tie {
    size_t parameter = 0;      // index in this rank's parameter list
    std::string key;           // the tied key, equal on every holder
    std::vector<int> holders;  // pipeline ranks holding it, ascending
  };
  Communicator& communicator_;
  int pp_rank_ = 0;
  size_t parameter_count_ = 0;
  std::vector<Tie> ties_;  // sorted by key: the same order on every holder
};

}  // namespace triax
