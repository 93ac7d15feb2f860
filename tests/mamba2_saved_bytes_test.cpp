// What one Mamba-2 layer's forward keeps for its backward, measured on CPU as the tensor storage
// still alive after the forward beyond its inputs and outputs (the CPU allocator counted by
// cpu_live_bytes.hpp). The chunked SSD keeps only its inputs, so what the mixer keeps grows with
// b·l·d and not with the chunk size: [chunk, chunk] tensors per head (b·l·H·chunk values) once
// kept by autograd in every layer made the 780m shape run out of memory on an 80 GB GPU.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <string>

#include "cpu_live_bytes.hpp"
#include "gated_norm.hpp"
#include "mamba2_mixer.hpp"
#include "mamba2_test_support.hpp"
#include "model_reference_support.hpp"
#include "ssd.hpp"

namespace {

using triax::mamba2::Mamba2Mixer;
using triax::test::CpuLiveBytes;

int64_t bytes_of(const at::Tensor& t) { return static_cast<int64_t>(t.nbytes()); }

// hidden 32, 8 heads of 8 channels (d 64) in one group, state 16: chunks much longer than a head.
std::shared_ptr<Mamba2Mixer> mixer_with_chunks(int64_t chunk_size) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(11);
  return mamba2_test::random_mixer(
      "hidden_size: 32\nnum_hidden_layers: 1\nvocab_size: 30\nnum_heads: 8\nhead_dim: 8\nstate_size: 16\n"
      "n_groups: 1\nchunk_size: " + std::to_string(chunk_size) + "\n",
      triax::test::tiny_model_context(), g);
}

// Bytes alive after the forward of `mixer` on [2, 256, 32] beyond its input and output.
int64_t kept_by_forward(Mamba2Mixer& mixer) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(12);
  const at::Tensor hidden = at::randn({2, 256, 32}, g, at::kFloat).requires_grad_(true);
  CpuLiveBytes live;
  const int64_t before = live.bytes();
  const at::Tensor out = mixer.forward(hidden);
  const int64_t kept = live.bytes() - before - bytes_of(out);
  out.sum().backward();  // the graph was whole: every parameter gets a gradient
  for (const at::Tensor& p : mixer.parameters()) EXPECT_TRUE(p.grad().defined());
  return kept;
}

TEST(Mamba2SavedBytes, TheSsdKeepsNothingBeyondItsInputs) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(13);
  triax::mamba2::SsdInputs in;
  in.x = at::randn({2, 256, 8, 8}, g, at::kFloat).requires_grad_(true);
  in.dt = at::rand({2, 256, 8}, g, at::kFloat).mul(0.1).requires_grad_(true);
  in.A = -at::rand({8}, g, at::kFloat).add(1.0).requires_grad_(true);
  in.B = at::randn({2, 256, 1, 16}, g, at::kFloat).requires_grad_(true);
  in.C = at::randn({2, 256, 1, 16}, g, at::kFloat).requires_grad_(true);
  CpuLiveBytes live;
  const int64_t before = live.bytes();
  const auto out = triax::mamba2::ssd_chunked(in, 64);
  EXPECT_EQ(live.bytes() - before - bytes_of(out.y) - bytes_of(out.final_state), 0);
}

// With chunks of 64 positions and heads of 8 channels, one [chunk, chunk] tensor per head weighs
// 8 times the layer's d_inner activations (b·l·d fp32): none may be kept, whatever the chunk size.
TEST(Mamba2SavedBytes, OneLayerKeepsAFewActivationsPerChannelWhateverTheChunkSize) {
  const int64_t activations = 2 * 256 * 64 * 4;  // b·l·d in fp32
  const int64_t short_chunks = kept_by_forward(*mixer_with_chunks(16));
  const int64_t long_chunks = kept_by_forward(*mixer_with_chunks(64));
  std::printf("kept by one layer's forward: %lld bytes with chunks of 16, %lld with 64 (%.2f x b·l·d fp32)\n",
              static_cast<long long>(short_chunks), static_cast<long long>(long_chunks),
              static_cast<double>(long_chunks) / activations);
  EXPECT_EQ(long_chunks, short_chunks);
  EXPECT_LT(long_chunks, 16 * activations);
}

// The gated norm's autograd function (the CUDA path's) keeps nothing but the per-row rstd beyond
// its inputs; the composition (the CPU path's) keeps fp32 copies of its activations. With the
// layer's bytes above, their difference estimates what one layer keeps on the GPU.
TEST(Mamba2SavedBytes, TheGatedNormFunctionKeepsOnlyItsRstd) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(14);
  const int64_t rows = 2 * 256, d = 64;
  triax::mamba2::GatedNormArgs args{at::randn({2, 256, 8, 8}, g, at::kFloat).requires_grad_(true),
                                    at::randn({2, 256, 8, 8}, g, at::kFloat).requires_grad_(true),
                                    at::randn({2, 256, d}, g, at::kFloat).requires_grad_(true),
                                    at::randn({8}, g, at::kFloat).requires_grad_(true),
                                    at::randn({d}, g, at::kFloat).requires_grad_(true),
                                    1,
                                    1e-5};
  auto kept_by = [&](auto norm) {
    CpuLiveBytes live;
    const int64_t before = live.bytes();
    const at::Tensor out = norm(args, at::kFloat);
    return live.bytes() - before - bytes_of(out);
  };
  const int64_t fused = kept_by(triax::mamba2::gated_rms_norm_function);
  const int64_t composed = kept_by(triax::mamba2::gated_rms_norm_composed);
  std::printf("kept by the gated norm: %lld bytes by the autograd function, %lld by the composition (%.2f x b·l·d "
              "fp32)\n",
              static_cast<long long>(fused), static_cast<long long>(composed),
              static_cast<double>(composed) / (rows * d * 4));
  EXPECT_EQ(fused, rows * 4);  // rstd: one fp32 per row and group
  EXPECT_GT(composed, 2 * rows * d * 4);
}

}  // namespace
