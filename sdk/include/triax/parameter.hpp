// Metadata that travels with every parameter: where its shard sits in the whole tensor, and
// how the optimizer and checkpoint store must treat it.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "triax/abi.h"

namespace triax {

// What a parameter is to a width-aware parametrisation (spectral muP, triax/spectral_mup.hpp).
// The SDK's layers declare it; a model's own parameters declare it in their spec.
enum class ParameterRole {
  Undeclared,  // plain modules' parameters: a muP model must declare every one
  Matrix,      // a linear map: the last two dimensions of the meaningful shape are [fan_out, fan_in]
  // A fused projection (q/k/v, gate/up): several linear maps of one fan_in side by side,
  // [..., fan_in]; muP scales it as the widest of them (ParameterSpec::part_fan_out), so that
  // fusing leaves the scales of the separate maps unchanged when their widths agree
  FusedMatrix,
  Embedding,   // a lookup table (token embeddings), rows picked by one-hot inputs
  Vector       // a gain or a bias (norm weights, linear biases)
};

struct ParameterSpec {
  std::vector<int64_t> global_shape;  // the whole parameter, all tp shards together
  std::vector<int64_t> shard_offset;  // where this rank's shard starts, per dimension
  uint32_t flags = 0;                 // TRIAX_PARAM_*
  std::string tied_key;               // with TRIAX_PARAM_TIED
  // The meaningful extent of the whole parameter when part of it is padding (a vocabulary
  // padded to a multiple of tp); empty: all of global_shape. Checkpoints leave padding out.
  std::vector<int64_t> unpadded_shape;
  // The group its gradient is averaged over and whose ranks hold identical copies: TRIAX_GROUP_DP,
  // or TRIAX_GROUP_EDP for an expert shard (sharded over TRIAX_GROUP_EP via global_shape and
  // shard_offset).
  triax_group gradient_group = TRIAX_GROUP_DP;
  ParameterRole role = ParameterRole::Undeclared;
  // Factor on the learning rate for this parameter (ABI 1.5): 1, or muP's per-parameter scale.
  double lr_scale = 1.0;
  // FusedMatrix: the output features of its widest part, all tp shards together.
  int64_t part_fan_out = 0;

  const std::vector<int64_t>& meaningful_shape() const { return unpadded_shape.empty() ? global_shape : unpadded_shape; }

  // A parameter held whole and identical on every tp rank.
  static ParameterSpec replicated(const at::Tensor& tensor, uint32_t extra_flags = 0,
                                  ParameterRole role = ParameterRole::Undeclared);
  // This rank's slice along `dim` of a parameter whose whole shape is `global_shape`.
  static ParameterSpec sharded(std::vector<int64_t> global_shape, int64_t dim, int64_t offset,
                               uint32_t extra_flags = 0, ParameterRole role = ParameterRole::Undeclared);
};

struct NamedParameter {
  std::string name;
  at::Tensor tensor;
  ParameterSpec spec;
};

// Base of modules that register parameters with explicit metadata (the parallel layers).
// Parameters registered by plain modules default to ParameterSpec::replicated.
class SpecifiedModule : public torch::nn::Module {
 public:
  using torch::nn::Module::Module;
  // Metadata of a parameter registered by this module under `local_name`, or null.
  const ParameterSpec* spec_of(const std::string& local_name) const;
  // Marks a parameter as one copy of a logical parameter held by several pipeline stages (an
  // embedding tied to a head on another stage): flagged TRIAX_PARAM_TIED with `tied_key`, the
  // same on every holder, so the host sums the copies' gradients before the step.
  void tie_parameter(const std::string& local_name, const std::string& tied_key);
  // Declares that only `unpadded_shape` of the whole parameter is meaningful, the rest padding
  // (rows of a padded vocabulary): checkpoints and exports store the meaningful part only.
  void mark_padding(const std::string& local_name, std::vector<int64_t> unpadded_shape);
  // Declares a parameter an expert shard: this ep rank's slice of the experts (global_shape and
  // shard_offset say which), replicated over the edp group, so its gradient is averaged over edp
  // and the checkpoint stores it once per ep shard.
  void mark_expert(const std::string& local_name);

 protected:
  at::Tensor register_parameter_with_spec(const std::string& local_name, at::Tensor tensor, ParameterSpec spec);

 private:
  std::map<std::string, ParameterSpec> specs_;
};

// Every distinct parameter of `root` with its metadata, in registration order. A tensor
// reachable under several names (tied weights) appears once, under its first name.
std::vector<NamedParameter> collect_parameters(torch::nn::Module& root);

}  // namespace triax
