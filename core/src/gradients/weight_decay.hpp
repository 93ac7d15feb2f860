// Which parameters get weight decay: all of them, as in nanotron, except those whose name (or
// tied name) matches one of optimizer.weight_decay_exclude_named_params — regular expressions
// anchored at the start of the name, like Python's re.match — and those the model itself flags
// TRIAX_PARAM_NO_WEIGHT_DECAY.
#pragma once

#include <regex>
#include <string>
#include <vector>

#include "triax/parameter.hpp"

namespace triax {

class WeightDecayPolicy {
 public:
  WeightDecayPolicy(double weight_decay, const std::vector<std::string>& exclude_patterns);
  bool excludes(const NamedParameter& parameter) const;
  // The weight decay this parameter's update uses.
  double for_parameter(const NamedParameter& parameter) const { return excludes(parameter) ? 0.0 : weight_decay_; }

 private:
  bool matches(const std::string& name) const;

  double weight_decay_;
  std::vector<std::regex> patterns_;
};

}  // namespace triax
