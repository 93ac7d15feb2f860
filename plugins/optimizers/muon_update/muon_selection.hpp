// Which parameters take Muon and which AdamW, by shape and name.
//
// Muon orthogonalises matrices: a parameter's matrix view is its whole (all tensor-parallel shards
// together) 2-D shape; a 3-D parameter is a fused projection stored [parts, out, in], taken as the
// one [parts x out, in] matrix its layer multiplies by, or, for an expert shard (gradient group
// edp), one [out, in] matrix per expert. Automatically, a matrix takes Muon unless a side is 1
// (a vector stored 2-D), its name matches adamw_named_params, or it holds more than
// max_muon_matrix_elements; everything else (1-D gains and biases above all) takes AdamW. A name
// matching muon_named_params takes Muon whatever the rest says, and a parameter Muon cannot
// orthogonalise is then refused.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "muon_settings.hpp"
#include "triax/optimizer.hpp"

namespace triax::plugins {

// `count` matrices of rows x cols.
struct MatrixView {
  int64_t count = 1, rows = 0, cols = 0;
};

// The whole parameter's shape: global_shape when the host gave it, else the tensor's own.
std::vector<int64_t> whole_shape(const OptimizerParam& param);
// Whether the parameter is an expert shard (one matrix per expert along its first dimension).
bool holds_experts(const OptimizerParam& param);
// The matrix view of the whole parameter, or nullopt where it has none (fewer than 2 or more than
// 3 dimensions).
std::optional<MatrixView> matrix_view(const OptimizerParam& param);

struct OptimizerChoice {
  bool muon = false;
  std::string reason;  // why: "a matrix", "1-D", "named in adamw_named_params ('.*embed')", ...
};

// One choice per parameter. A parameter named in muon_named_params that Muon cannot take is a
// ConfigError naming the parameter, its shape and the key.
std::vector<OptimizerChoice> choose_optimizers(const std::vector<OptimizerParam>& params,
                                               const MuonSettings& settings);

// Log lines: how many tensors take each, by reason, with their names (layer numbers folded).
std::vector<std::string> describe_choices(const std::vector<OptimizerParam>& params,
                                          const std::vector<OptimizerChoice>& choices);

}  // namespace triax::plugins
