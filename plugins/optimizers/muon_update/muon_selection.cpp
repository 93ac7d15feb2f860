#include "muon_selection.hpp"

#include <map>
#include <regex>

#include "triax/tensor_text.hpp"

namespace triax::plugins {
namespace {

// The first pattern matching `name` from its start (nanotron's re.match), or nullopt.
std::optional<std::string> first_match(const std::vector<std::string>& patterns, const std::string& name) {
  for (const std::string& pattern : patterns)
    if (std::regex_search(name, std::regex(pattern), std::regex_constants::match_continuous)) return pattern;
  return std::nullopt;
}

// Why Muon cannot take this parameter even when forced, or nullopt.
std::optional<std::string> cannot_orthogonalise(const OptimizerParam& param, const MuonSettings& settings) {
  const std::optional<MatrixView> view = matrix_view(param);
  if (!view) return std::to_string(whole_shape(param).size()) + "-D, not a matrix";
  if (view->rows * view->cols > settings.max_matrix_elements)
    return "its matrix of " + std::to_string(view->rows) + " x " + std::to_string(view->cols) +
           " elements exceeds max_muon_matrix_elements (" + std::to_string(settings.max_matrix_elements) + ")";
  return std::nullopt;
}

OptimizerChoice automatic_choice(const OptimizerParam& param, const MuonSettings& settings) {
  const std::optional<MatrixView> view = matrix_view(param);
  if (!view) return {false, std::to_string(whole_shape(param).size()) + "-D"};
  if (view->rows == 1 || view->cols == 1) return {false, "a vector stored as a matrix"};
  if (const std::optional<std::string> pattern = first_match(settings.adamw_named_params, param.name))
    return {false, "named in adamw_named_params ('" + *pattern + "')"};
  if (cannot_orthogonalise(param, settings)) return {false, "larger than max_muon_matrix_elements"};
  return {true, holds_experts(param) ? "expert matrices" : "a matrix"};
}

// A parameter name with its layer numbers folded: model.layers.*.mlp.down_proj.weight.
std::string folded(const std::string& name) {
  static const std::regex number("\\.[0-9]+\\.");
  return std::regex_replace(name, number, ".*.");
}

}  // namespace

std::vector<int64_t> whole_shape(const OptimizerParam& param) {
  return param.global_shape.empty() ? param.param.sizes().vec() : param.global_shape;
}

bool holds_experts(const OptimizerParam& param) {
  return param.gradient_group == TRIAX_GROUP_EDP || param.gradient_group == TRIAX_GROUP_EDP_CP;
}

std::optional<MatrixView> matrix_view(const OptimizerParam& param) {
  const std::vector<int64_t> shape = whole_shape(param);
  if (shape.size() == 2) return MatrixView{1, shape[0], shape[1]};
  if (shape.size() != 3) return std::nullopt;
  if (holds_experts(param)) return MatrixView{shape[0], shape[1], shape[2]};
  return MatrixView{1, shape[0] * shape[1], shape[2]};
}

std::vector<OptimizerChoice> choose_optimizers(const std::vector<OptimizerParam>& params,
                                               const MuonSettings& settings) {
  std::vector<OptimizerChoice> choices;
  choices.reserve(params.size());
  for (const OptimizerParam& param : params) {
    const std::optional<std::string> forced = first_match(settings.muon_named_params, param.name);
    if (!forced) {
      choices.push_back(automatic_choice(param, settings));
      continue;
    }
    if (const std::optional<std::string> why = cannot_orthogonalise(param, settings))
      settings.fail("muon_named_params", "'" + *forced + "' names parameter " + param.name + " of shape " +
                                             shape_text(whole_shape(param)) + ", which Muon cannot orthogonalise: " +
                                             *why);
    choices.push_back({true, "named in muon_named_params ('" + *forced + "')"});
  }
  return choices;
}

std::vector<std::string> describe_choices(const std::vector<OptimizerParam>& params,
                                          const std::vector<OptimizerChoice>& choices) {
  // (optimizer, reason) -> folded name -> tensors
  std::map<std::pair<bool, std::string>, std::map<std::string, int>> groups;
  for (size_t i = 0; i < params.size(); ++i) ++groups[{choices[i].muon, choices[i].reason}][folded(params[i].name)];
  std::vector<std::string> lines;
  for (bool muon : {true, false})
    for (const auto& [key, names] : groups) {
      if (key.first != muon) continue;
      int tensors = 0;
      std::string listed;
      for (const auto& [name, count] : names) {
        tensors += count;
        listed += (listed.empty() ? "" : ", ") + name + (count > 1 ? " (x" + std::to_string(count) + ")" : "");
      }
      lines.push_back(std::string(muon ? "Muon" : "AdamW") + " for " + std::to_string(tensors) +
                      (tensors == 1 ? " tensor, " : " tensors, ") +
                      key.second + ": " + listed);
    }
  return lines;
}

}  // namespace triax::plugins
