#include "gradients/weight_decay.hpp"

namespace triax {

WeightDecayPolicy::WeightDecayPolicy(double weight_decay, const std::vector<std::string>& exclude_patterns)
    : weight_decay_(weight_decay) {
  for (const auto& pattern : exclude_patterns) patterns_.emplace_back(pattern);
}

bool WeightDecayPolicy::matches(const std::string& name) const {
  for (const auto& pattern : patterns_)
    if (std::regex_search(name, pattern, std::regex_constants::match_continuous)) return true;
  return false;
}

bool WeightDecayPolicy::excludes(const NamedParameter& parameter) const {
  if (parameter.spec.flags & TRIAX_PARAM_NO_WEIGHT_DECAY) return true;
  return matches(parameter.name) || (!parameter.spec.tied_key.empty() && matches(parameter.spec.tied_key));
}

}  // namespace triax
