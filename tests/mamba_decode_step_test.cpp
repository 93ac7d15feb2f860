// A Mamba layer's decoding step (scan/decode_step.hpp), one token at a time over several steps so
// that the conv state shifts through every tap. MambaDecodeStepCpu: the composition (what the CPU
// runs) against the whole sequence in double loops. MambaDecodeStepCuda (label gpu; skipped
// without a GPU): the fused kernels against that composition in fp64 from the same input values,
// the outputs and both states after every step, fp32 within 1e-4 and bf16 within 2e-2 of the
// largest reference value, at batch 1 and 32, d_state 16 (and 5), 4 taps (and 2), with x, z, B and
// C read as the strided views of the projections' outputs that the mixer passes. The .Folded*
// tests: dt_proj folded into the SSM step (TRIAX_MAMBA_DT_IN_STEP), dt read from x_proj's output.
// .VectorLoads*: the thread-per-channel step's 16-byte loads against its
// scalar loads, bit for bit.
#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "dispatched_ops.hpp"
#include "decode_step.hpp"
#include "mamba_scan_test_support.hpp"
#include "scoped_variable.hpp"
#include "triax/layers/fused_ops.hpp"

namespace {

using namespace mamba_scan_test;
using triax::mamba::SsmStepArgs;

struct StepShape {
  int64_t rows, d, n, taps, steps;
};

// The whole sequence's inputs, fp64 on the CPU; x and z as the halves of one [rows, 2d, steps]
// product, dt, B and C as parts of one [rows, r + 2n, steps] (r = 3), as the mixer's views are.
struct StepInputs {
  at::Tensor xz, conv_weight, conv_bias, u, delta, A_log, projected, D, delta_bias, dt_proj_weight;

  at::Tensor x(int64_t t) const { return xz.narrow(1, 0, conv_weight.size(0)).select(2, t); }
  int64_t r() const { return dt_proj_weight.size(1); }
  SsmStepArgs ssm(int64_t t, const at::Tensor& u_t) const {
    const int64_t d = conv_weight.size(0), n = A_log.size(1);
    return SsmStepArgs{u_t, delta.select(2, t).contiguous(), A_log, projected.narrow(1, r(), n).select(2, t),
                       projected.narrow(1, r() + n, n).select(2, t), D, xz.narrow(1, d, d).select(2, t), delta_bias,
                       /*dt=*/at::Tensor(), /*dt_proj_weight=*/at::Tensor()};
  }
  // dt: x_proj's first r outputs of step t, a strided view.
  at::Tensor dt(int64_t t) const { return projected.narrow(1, 0, r()).select(2, t); }
  // ssm(t) with dt_proj folded into the step (TRIAX_MAMBA_DT_IN_STEP): delta = dt @ dt_proj_weight^T.
  SsmStepArgs folded_ssm(int64_t t, const at::Tensor& u_t) const {
    SsmStepArgs args = ssm(t, u_t);
    args.delta = at::Tensor();
    args.dt = dt(t);
    args.dt_proj_weight = dt_proj_weight;
    return args;
  }
};

StepInputs step_inputs(const StepShape& s, uint64_t seed, int64_t r = 3) {
  StepInputs in;
  in.xz = seeded({s.rows, 2 * s.d, s.steps}, seed).transpose(1, 2).contiguous().transpose(1, 2);
  in.conv_weight = seeded({s.d, s.taps}, seed + 1, 0.5);
  in.conv_bias = seeded({s.d}, seed + 2, 0.1);
  in.u = seeded({s.rows, s.d, s.steps}, seed + 3);
  in.delta = seeded({s.rows, s.d, s.steps}, seed + 4, 0.5, -3.0);
  in.A_log = seeded({s.d, s.n}, seed + 5, 0.5, 0.5);
  in.projected = seeded({s.rows, r + 2 * s.n, s.steps}, seed + 6).transpose(1, 2).contiguous().transpose(1, 2);
  in.D = seeded({s.d}, seed + 7);
  in.delta_bias = seeded({s.d}, seed + 8, 0.3);
  in.dt_proj_weight = seeded({s.d, r}, seed + 9, 1.0 / std::sqrt(static_cast<double>(r)));
  return in;
}

// Every tensor of `in` in dtype on device (strides kept: the strided views stay strided).
StepInputs converted(const StepInputs& in, c10::Device device, c10::ScalarType dtype) {
  StepInputs out;
  at::Tensor StepInputs::*const members[] = {
      &StepInputs::xz,        &StepInputs::conv_weight, &StepInputs::conv_bias,  &StepInputs::u,
      &StepInputs::delta,     &StepInputs::A_log,       &StepInputs::projected,  &StepInputs::D,
      &StepInputs::delta_bias, &StepInputs::dt_proj_weight};
  for (auto member : members) out.*member = (in.*member).to(device, dtype);
  return out;
}

TEST(MambaDecodeStepCpu, ConvStepsEqualTheSequencesConv) {
  for (int64_t taps : {1, 2, 4}) {
    SCOPED_TRACE("taps " + std::to_string(taps));
    const StepShape s{3, 5, 4, taps, 7};
    const StepInputs in = step_inputs(s, 11);
    const at::Tensor x = in.xz.narrow(1, 0, s.d);
    const at::Tensor expected = conv_by_loops(x, in.conv_weight, in.conv_bias, /*silu=*/true);
    at::Tensor state = at::zeros({s.rows, s.d, taps - 1}, at::kDouble);
    for (int64_t t = 0; t < s.steps; ++t) {
      const at::Tensor u = triax::mamba::conv_state_step(in.x(t), state, in.conv_weight, in.conv_bias);
      EXPECT_LT(relative_error(u, expected.select(2, t)), 1e-12) << "step " << t;
    }
    EXPECT_TRUE(at::equal(state, x.narrow(2, s.steps - (taps - 1), taps - 1))) << "the last inputs";
  }
}

TEST(MambaDecodeStepCpu, SsmStepsEqualTheSequencesScan) {
  const StepShape s{3, 5, 16, 4, 7};
  const StepInputs in = step_inputs(s, 21);
  triax::mamba::SelectiveScanArgs whole;
  whole.u = in.u;
  whole.delta = in.delta;
  whole.A = -at::exp(in.A_log);
  whole.B = in.projected.narrow(1, 3, s.n);
  whole.C = in.projected.narrow(1, 3 + s.n, s.n);
  whole.D = in.D;
  whole.z = in.xz.narrow(1, s.d, s.d);
  whole.delta_bias = in.delta_bias;
  const auto [expected, expected_state] = scan_by_loops(whole, at::Tensor());
  at::Tensor state = at::zeros({s.rows, s.d, s.n}, at::kDouble);
  for (int64_t t = 0; t < s.steps; ++t) {
    const at::Tensor y = triax::mamba::ssm_state_step(in.ssm(t, in.u.select(2, t)), state);
    EXPECT_LT(relative_error(y, expected.select(2, t)), 1e-6) << "step " << t;  // the state passes through fp32
  }
  EXPECT_LT(relative_error(state, expected_state), 1e-6);
}

// TRIAX_MAMBA_DT_IN_STEP: the step given dt and dt_proj's weight equals the step given their
// product, bit for bit (the composition computes the same product), in fp64 and fp32.
TEST(MambaDecodeStepCpu, FoldedDtProjEqualsTheProductBeforeTheStep) {
  const StepShape s{3, 5, 16, 4, 7};
  for (c10::ScalarType dtype : {at::kDouble, at::kFloat}) {
    SCOPED_TRACE(c10::toString(dtype));
    const StepInputs in = converted(step_inputs(s, 51), at::kCPU, dtype);
    at::Tensor folded_state = at::zeros({s.rows, s.d, s.n}, dtype), state = folded_state.clone();
    for (int64_t t = 0; t < s.steps; ++t) {
      const at::Tensor u = in.u.select(2, t).contiguous();
      SsmStepArgs unfolded = in.ssm(t, u);
      unfolded.delta = at::mm(in.dt(t), in.dt_proj_weight.t());
      const at::Tensor y = triax::mamba::ssm_state_step(in.folded_ssm(t, u), folded_state);
      EXPECT_TRUE(at::equal(y, triax::mamba::ssm_state_step(unfolded, state))) << "step " << t;
      EXPECT_TRUE(at::equal(folded_state, state)) << "step " << t;
    }
  }
  const StepInputs in = step_inputs({2, 5, 4, 4, 1}, 53);
  SsmStepArgs both = in.folded_ssm(0, in.u.select(2, 0).contiguous());
  both.delta = in.delta.select(2, 0).contiguous();
  EXPECT_THROW(triax::mamba::ssm_state_step(both, at::zeros({2, 5, 4}, at::kDouble)), std::exception);
}

TEST(MambaDecodeStepCpu, MisshapenStateIsRefused) {
  const StepInputs in = step_inputs({2, 5, 4, 4, 1}, 31);
  EXPECT_THROW(triax::mamba::conv_state_step(in.x(0), at::zeros({2, 5, 2}, at::kDouble), in.conv_weight, in.conv_bias),
               std::exception);
  EXPECT_THROW(triax::mamba::ssm_state_step(in.ssm(0, in.u.select(2, 0)), at::zeros({2, 5, 3}, at::kDouble)),
               std::exception);
}

// The concatenations and copies `work` dispatches: the composition's, none of the kernels'.
int64_t count_composition_ops(const std::function<void()>& work) {
  return count_dispatched_ops(work, {"aten::cat", "aten::copy_"});
}

void check_steps(const StepShape& s, c10::ScalarType dtype) {
  SCOPED_TRACE(std::string(c10::toString(dtype)) + " rows " + std::to_string(s.rows) + " d " + std::to_string(s.d) +
               " n " + std::to_string(s.n) + " taps " + std::to_string(s.taps));
  const StepInputs gpu = converted(step_inputs(s, 41 + s.rows), kCuda, dtype);
  const StepInputs rounded = converted(gpu, at::kCPU, at::kDouble);  // the kernels' values in fp64
  at::Tensor conv = at::zeros({s.rows, s.d, s.taps - 1}, at::TensorOptions(kCuda).dtype(dtype));
  at::Tensor ssm = at::zeros({s.rows, s.d, s.n}, at::TensorOptions(kCuda).dtype(at::kFloat));
  at::Tensor conv_ref = at::zeros({s.rows, s.d, s.taps - 1}, at::kDouble), ssm_ref = at::zeros_like(ssm, at::kDouble).cpu();
  for (int64_t t = 0; t < s.steps; ++t) {
    SCOPED_TRACE("step " + std::to_string(t));
    at::Tensor u;
    EXPECT_EQ(count_composition_ops([&] { u = triax::mamba::conv_state_step(gpu.x(t), conv, gpu.conv_weight, gpu.conv_bias); }), 0)
        << "the conv step ran the composition, not the kernel";
    ASSERT_EQ(u.scalar_type(), dtype);
    const at::Tensor u_ref = triax::mamba::conv_state_step(rounded.x(t), conv_ref, rounded.conv_weight, rounded.conv_bias);
    EXPECT_LT(relative_error(u, u_ref), tolerance(dtype)) << "u";
    EXPECT_TRUE(at::equal(conv.cpu().to(at::kDouble), conv_ref)) << "conv state";
    // Both scans from the kernel's u, so that each half is checked on its own.
    const SsmStepArgs args = gpu.ssm(t, u);
    at::Tensor y;
    EXPECT_EQ(count_composition_ops([&] { y = triax::mamba::ssm_state_step(args, ssm); }), 0)
        << "the SSM step ran the composition, not the kernel";
    const at::Tensor y_ref = triax::mamba::ssm_state_step(rounded.ssm(t, u.cpu().to(at::kDouble)), ssm_ref);
    EXPECT_LT(relative_error(y, y_ref), tolerance(dtype)) << "y";
    EXPECT_LT(relative_error(ssm, ssm_ref), tolerance(at::kFloat)) << "SSM state";
  }
}

// The SSM step's kernel with dt_proj folded in against the composition in fp64 of the product
// rounded to dtype (the unfolded step's delta) from the kernel's inputs, and against the unfolded
// kernel given LibTorch's product (the mixer with TRIAX_MAMBA_DT_IN_STEP=0).
void check_folded_steps(const StepShape& s, int64_t r, c10::ScalarType dtype) {
  SCOPED_TRACE(std::string(c10::toString(dtype)) + " rows " + std::to_string(s.rows) + " d " + std::to_string(s.d) +
               " n " + std::to_string(s.n) + " r " + std::to_string(r));
  const StepInputs gpu = converted(step_inputs(s, 71 + s.rows, r), kCuda, dtype);
  const StepInputs rounded = converted(gpu, at::kCPU, at::kDouble);  // the kernel's values in fp64
  at::Tensor state = at::zeros({s.rows, s.d, s.n}, at::TensorOptions(kCuda).dtype(at::kFloat));
  at::Tensor unfolded_state = state.clone(), state_ref = at::zeros({s.rows, s.d, s.n}, at::kDouble);
  for (int64_t t = 0; t < s.steps; ++t) {
    SCOPED_TRACE("step " + std::to_string(t));
    const at::Tensor u = gpu.u.select(2, t).contiguous();
    const SsmStepArgs folded = gpu.folded_ssm(t, u);  // outside the count: its delta is a copy
    at::Tensor y;
    EXPECT_EQ(count_composition_ops([&] { y = triax::mamba::ssm_state_step(folded, state); }), 0)
        << "the folded SSM step ran the composition, not the kernel";
    SsmStepArgs reference = rounded.ssm(t, u.cpu().to(at::kDouble));
    reference.delta = at::mm(rounded.dt(t), rounded.dt_proj_weight.t()).to(dtype).to(at::kDouble);
    const at::Tensor y_ref = triax::mamba::ssm_state_step(reference, state_ref);
    EXPECT_LT(relative_error(y, y_ref), tolerance(dtype)) << "y";
    EXPECT_LT(relative_error(state, state_ref), tolerance(dtype)) << "SSM state";
    SsmStepArgs unfolded = gpu.ssm(t, u);
    unfolded.delta = at::mm(gpu.dt(t), gpu.dt_proj_weight.t());
    EXPECT_LT(relative_error(y, triax::mamba::ssm_state_step(unfolded, unfolded_state)), tolerance(dtype))
        << "y of the unfolded kernel";
  }
}

// `check` under both layouts of the SSM step's kernel (ssm_state_step.cu): a lane per state, a
// thread per channel (TRIAX_MAMBA_SSM_STEP_PER_CHANNEL), each at fp32 and bf16, 1 and 32 rows.
void for_each_layout_dtype_and_rows(const std::function<void(c10::ScalarType, int64_t)>& check) {
  for (const char* per_channel : {"0", "1"}) {
    const ScopedVariable layout("TRIAX_MAMBA_SSM_STEP_PER_CHANNEL", per_channel);
    SCOPED_TRACE(std::string("TRIAX_MAMBA_SSM_STEP_PER_CHANNEL=") + per_channel);
    for (c10::ScalarType dtype : {at::kFloat, at::kBFloat16})
      for (int64_t rows : {1, 32}) check(dtype, rows);
  }
}

// TRIAX_MAMBA_SSM_STEP_VECTOR: the thread-per-channel kernel's 16-byte loads give its scalar
// loads' bits, y and the state after every step, with dt_proj folded in and without.
void check_vector_loads_keep_the_bits(const StepShape& s, int64_t r, c10::ScalarType dtype) {
  SCOPED_TRACE(std::string(c10::toString(dtype)) + " rows " + std::to_string(s.rows) + " d " + std::to_string(s.d) +
               " n " + std::to_string(s.n) + " r " + std::to_string(r));
  const ScopedVariable layout("TRIAX_MAMBA_SSM_STEP_PER_CHANNEL", "1");
  const StepInputs gpu = converted(step_inputs(s, 91 + s.rows, r), kCuda, dtype);
  for (bool folded : {false, true}) {
    SCOPED_TRACE(folded ? "folded dt_proj" : "delta given");
    at::Tensor scalar_state = at::zeros({s.rows, s.d, s.n}, at::TensorOptions(kCuda).dtype(at::kFloat));
    at::Tensor vector_state = scalar_state.clone();
    for (int64_t t = 0; t < s.steps; ++t) {
      SCOPED_TRACE("step " + std::to_string(t));
      const at::Tensor u = gpu.u.select(2, t).contiguous();
      const SsmStepArgs args = folded ? gpu.folded_ssm(t, u) : gpu.ssm(t, u);
      const auto step = [&](const char* vector_loads, const at::Tensor& state) {
        const ScopedVariable loads("TRIAX_MAMBA_SSM_STEP_VECTOR", vector_loads);
        return triax::mamba::ssm_state_step(args, state);
      };
      const at::Tensor scalar_y = step("0", scalar_state), vector_y = step("1", vector_state);
      ASSERT_GT(scalar_y.abs().max().item<double>(), 0.0);
      EXPECT_TRUE(at::equal(scalar_y, vector_y)) << "y differs by up to " << (scalar_y - vector_y).abs().max().item<double>();
      EXPECT_TRUE(at::equal(scalar_state, vector_state)) << "SSM state";
    }
  }
}

TEST(MambaDecodeStepCuda, VectorLoadsGiveTheScalarLoadsBits) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  for (c10::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    for (int64_t rows : {1, 16, 32}) {
      check_vector_loads_keep_the_bits({rows, 1536, 16, 4, 4}, 48, dtype);  // Mamba-130m: x_proj rows of 80
      check_vector_loads_keep_the_bits({rows, 203, 8, 2, 3}, 8, dtype);     // one pass of 8 states
      check_vector_loads_keep_the_bits({rows, 203, 40, 2, 3}, 8, dtype);    // passes of 16, 16 and 8
      check_vector_loads_keep_the_bits({rows, 203, 48, 2, 3}, 8, dtype);    // three passes of 16
      // Unaligned, the scalar loads: dt_rank 7 (x_proj rows of 39), dt_rank 3 and 5 states.
      check_vector_loads_keep_the_bits({rows, 203, 16, 2, 3}, 7, dtype);
      check_vector_loads_keep_the_bits({rows, 203, 5, 2, 3}, 3, dtype);
    }
  }
}

TEST(MambaDecodeStepCuda, FoldedDtProjMatchesTheComposition) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  ASSERT_TRUE(triax::fused_kernels_enabled());
  for_each_layout_dtype_and_rows([](c10::ScalarType dtype, int64_t rows) {
    check_folded_steps({rows, 1536, 16, 4, 5}, 48, dtype);  // Mamba-130m: dt_rank 48
    check_folded_steps({rows, 203, 5, 2, 3}, 3, dtype);     // fewer ranks than lanes or chains
    check_folded_steps({rows, 203, 40, 2, 3}, 7, dtype);    // state above 16, a rank left over
  });
}

TEST(MambaDecodeStepCuda, KernelsMatchTheComposition) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  ASSERT_TRUE(triax::fused_kernels_enabled());
  for_each_layout_dtype_and_rows([](c10::ScalarType dtype, int64_t rows) {
    check_steps({rows, 1536, 16, 4, 6}, dtype);
    check_steps({rows, 203, 5, 2, 4}, dtype);
    check_steps({rows, 203, 40, 2, 4}, dtype);  // state above 16: two lanes' or passes' worth
  });
}

}  // namespace
