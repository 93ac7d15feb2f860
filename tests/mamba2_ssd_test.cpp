// The chunked SSD (plugins/models/mamba2/ssd.hpp) against the sequential scan, in fp64: outputs and
// final states for chunk sizes that do and do not divide the length (and exceed it), grouped B/C,
// an initial state, every input's gradient, fp32 inputs, and the refusal of a bad chunk size.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include "error_of.hpp"
#include "mamba2_ssd_reference.hpp"
#include "model_reference_support.hpp"
#include "ssd.hpp"

namespace {

using triax::mamba2::SsdInputs;
using triax::mamba2::ssd_chunked;

using triax::test::max_abs_diff;

// batch 2, length 13, 4 heads of 3 channels in 2 groups, state 5; steps of realistic size.
SsdInputs random_inputs(uint64_t seed, bool with_initial_state) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
  const at::TensorOptions f64 = at::TensorOptions().dtype(at::kDouble);
  SsdInputs in;
  in.x = at::randn({2, 13, 4, 3}, g, f64);
  in.dt = at::softplus(at::randn({2, 13, 4}, g, f64) - 1.0);
  in.A = -at::exp(at::randn({4}, g, f64));
  in.B = at::randn({2, 13, 2, 5}, g, f64);
  in.C = at::randn({2, 13, 2, 5}, g, f64);
  if (with_initial_state) in.initial_state = at::randn({2, 4, 3, 5}, g, f64);
  return in;
}

TEST(Mamba2Ssd, ChunkedEqualsSequentialForEveryChunkSize) {
  for (bool initial : {false, true}) {
    const SsdInputs in = random_inputs(1, initial);
    const auto [y, state] = mamba2_test::sequential_ssd(in.x, in.dt, in.A, in.B, in.C, in.initial_state);
    ASSERT_GT(y.abs().max().item<double>(), 0.1);
    for (int64_t chunk : {1, 2, 3, 4, 5, 13, 16, 64}) {
      const auto out = ssd_chunked(in, chunk);
      EXPECT_EQ(out.y.scalar_type(), at::kDouble);
      EXPECT_LT(max_abs_diff(out.y, y), 1e-12) << "chunk " << chunk << " initial " << initial;
      EXPECT_LT(max_abs_diff(out.final_state, state), 1e-12) << "chunk " << chunk << " initial " << initial;
    }
  }
}

TEST(Mamba2Ssd, GradientsEqualTheSequentialScans) {
  for (int64_t chunk : {3, 4, 16}) {
    SsdInputs chunked = random_inputs(2, true), sequential = random_inputs(2, true);
    std::vector<at::Tensor*> a = {&chunked.x, &chunked.dt, &chunked.A, &chunked.B, &chunked.C, &chunked.initial_state};
    std::vector<at::Tensor*> b = {&sequential.x,  &sequential.dt, &sequential.A,
                                  &sequential.B,  &sequential.C,  &sequential.initial_state};
    for (at::Tensor* t : a) t->requires_grad_(true);
    for (at::Tensor* t : b) t->requires_grad_(true);
    at::Generator g = at::make_generator<at::CPUGeneratorImpl>(7);
    const at::Tensor weight_y = at::randn({2, 13, 4, 3}, g, at::kDouble);
    const at::Tensor weight_state = at::randn({2, 4, 3, 5}, g, at::kDouble);
    const auto out = ssd_chunked(chunked, chunk);
    ((out.y * weight_y).sum() + (out.final_state * weight_state).sum()).backward();
    const auto [y, state] = mamba2_test::sequential_ssd(sequential.x, sequential.dt, sequential.A, sequential.B,
                                                        sequential.C, sequential.initial_state);
    ((y * weight_y).sum() + (state * weight_state).sum()).backward();
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_TRUE(a[i]->grad().defined()) << i;
      EXPECT_GT(b[i]->grad().abs().max().item<double>(), 1e-3) << i;
      EXPECT_LT(max_abs_diff(a[i]->grad(), b[i]->grad()), 1e-10) << "input " << i << " chunk " << chunk;
    }
  }
}

TEST(Mamba2Ssd, Fp32InputsComputeInFp32) {
  const SsdInputs in = random_inputs(3, false);
  SsdInputs single = in;
  for (at::Tensor* t : {&single.x, &single.dt, &single.A, &single.B, &single.C}) *t = t->to(at::kFloat);
  const auto out = ssd_chunked(single, 4);
  EXPECT_EQ(out.y.scalar_type(), at::kFloat);
  EXPECT_LT(max_abs_diff(out.y, ssd_chunked(in, 4).y), 1e-4);
}

TEST(Mamba2Ssd, RefusesABadChunkSizeAndShapes) {
  const SsdInputs in = random_inputs(4, false);
  const std::string chunk = triax::test::error_of([&] { ssd_chunked(in, 0); });
  EXPECT_NE(chunk.find("chunk_size must be positive, got 0"), std::string::npos) << chunk;
  SsdInputs ungrouped = in;
  ungrouped.B = at::zeros({2, 13, 3, 5}, at::kDouble);
  ungrouped.C = ungrouped.B;
  const std::string groups = triax::test::error_of([&] { ssd_chunked(ungrouped, 4); });
  EXPECT_NE(groups.find("heads not divisible by groups"), std::string::npos) << groups;
}

}  // namespace
