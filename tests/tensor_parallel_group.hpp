// What the tests of the SDK's tensor-parallel layers share: the whole world as one tensor-parallel
// group (tp = the number of ranks mpirun started), and the helpers that compare a layer run by
// every rank with the whole computation each rank also does on its own from the same seeded
// tensors.
#pragma once

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "multi_rank_environment.hpp"
#include "triax/core/comm/communicator.hpp"
#include "triax/layers/tensor_parallel.hpp"

namespace triax::testing {

// The world's tp group in `mode`, through host services that must outlive the group's use.
struct WorldTensorParallel {
  std::unique_ptr<HostServices> services;
  TensorParallel tp;
};

inline WorldTensorParallel world_tensor_parallel(TpMode mode) {
  MeshShape shape;
  shape.tp = world_size();
  WorldTensorParallel world{std::make_unique<HostServices>(communicator(shape)), {}};
  world.tp.host = Host(world.services->c_host());
  world.tp.rank = world.tp.host.rank(TRIAX_GROUP_TP);
  world.tp.size = world.tp.host.size(TRIAX_GROUP_TP);
  world.tp.mode = mode;
  return world;
}

inline at::Tensor seeded(std::vector<int64_t> shape, uint64_t seed, c10::ScalarType dtype, double std = 1.0) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return (at::randn(shape, generator, at::TensorOptions().dtype(at::kDouble)) * std).to(dtype);
}

inline at::Tensor leaf(const at::Tensor& t) { return t.detach().clone().requires_grad_(true); }

inline void assign(const at::Tensor& parameter, const at::Tensor& value) {
  at::NoGradGuard no_grad;
  parameter.copy_(value);
}

// This rank's even slice of `full` along `dim`.
inline at::Tensor shard_of(const at::Tensor& full, int64_t dim, const TensorParallel& tp) {
  return full.chunk(tp.size, dim)[tp.rank].contiguous();
}

// Sequence-parallel activations are this rank's slice along dim 1; ALL_REDUCE ones are whole.
inline at::Tensor between_blocks(const at::Tensor& full, const TensorParallel& tp) {
  return tp.mode == TpMode::ReduceScatter ? shard_of(full, 1, tp) : full;
}

// Every rank's `local` joined along `dim`, through the host's all-gather (which joins dim 0).
inline at::Tensor gathered(const at::Tensor& local, int64_t dim, const TensorParallel& tp) {
  at::Tensor first = local.movedim(dim, 0).contiguous();
  std::vector<int64_t> shape = first.sizes().vec();
  shape[0] *= tp.size;
  at::Tensor out = at::empty(shape, first.options());
  tp.host.all_gather(TRIAX_GROUP_TP, out, first);
  return out.movedim(0, dim);
}

// max |actual - expected| relative to max |expected|, at most `tolerance`.
inline void expect_close(const at::Tensor& actual, const at::Tensor& expected, const std::string& what,
                         double tolerance) {
  ASSERT_TRUE(actual.defined()) << what << ": undefined";
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  const double scale = std::max(expected.abs().max().item<double>(), 1e-30);
  const double error = (actual.to(at::kDouble) - expected.to(at::kDouble)).abs().max().item<double>() / scale;
  EXPECT_LE(error, tolerance) << what << ": relative error " << error;
}

}  // namespace triax::testing
