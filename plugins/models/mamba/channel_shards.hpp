// Parameters split over the tensor-parallel group along the mixer's channels (d_inner): each rank
// holds the slice of its channels, so that a checkpoint reshards them at any tp.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <string>
#include <vector>

#include "triax/layers/tensor_parallel.hpp"
#include "triax/parameter.hpp"

namespace triax::mamba {

class ChannelShards : public SpecifiedModule {
 public:
  ChannelShards(c10::Device device, c10::ScalarType dtype, TensorParallel tp)
      : device_(device), dtype_(dtype), tp_(std::move(tp)) {}

  // Registers `name`, this rank's share along `dim` of a parameter whose whole shape is
  // `global_shape` (global_shape[dim] divides by tp: the model checked d_inner). Empty, on the
  // model's device and dtype: the model initialises it.
  at::Tensor add(const std::string& name, std::vector<int64_t> global_shape, int64_t dim, uint32_t flags = 0) {
    std::vector<int64_t> local = global_shape;
    const int64_t whole = global_shape.at(static_cast<size_t>(dim));
    local[static_cast<size_t>(dim)] = tp_.shard_size(whole, name.c_str());
    at::Tensor tensor = at::empty(local, at::TensorOptions().device(device_).dtype(dtype_));
    return register_parameter_with_spec(
        name, tensor, ParameterSpec::sharded(std::move(global_shape), dim, tp_.shard_offset(whole), flags));
  }

  const TensorParallel& tp() const { return tp_; }

 private:
  c10::Device device_;
  c10::ScalarType dtype_;
  TensorParallel tp_;
};

}  // namespace triax::mamba
