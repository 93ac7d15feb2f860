// The ATen ops one Mamba-2 mixer dispatches in a bf16 training step (forward and backward),
// counted on CPU (ops_by_caller.hpp): the copies, casts, fills, adds and concatenations around
// the products and the scan, each a kernel launch of its own on a GPU. The chunked SSD's LibTorch
// path dispatches the same number of ops at any length, so one length gives the layer's counts.
// The table is printed (docs/mamba2-performance.md quotes it) and the counts are held at or below today's.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

#include "mamba2_test_support.hpp"
#include "model_reference_support.hpp"
#include "ops_by_caller.hpp"

namespace {

using ops_by_caller::count_ops;
using ops_by_caller::OpCounts;
using ops_by_caller::total;

// One group of 8 heads of 8 channels, state 16, chunks of 16 (the 780m shape's layout, small),
// bf16 parameters; [2, 64, 32] in and out: whole chunks, as at the benchmarked shapes.
OpCounts mixer_step_ops() {
  const mamba2_test::Bf16MixerStep step = mamba2_test::bf16_mixer_step(
      "hidden_size: 32\nnum_hidden_layers: 1\nvocab_size: 30\nnum_heads: 8\nhead_dim: 8\nstate_size: 16\n"
      "n_groups: 1\nchunk_size: 16\n",
      at::kCPU, {2, 64, 32}, 21);
  return count_ops([&] { step.mixer->forward(step.hidden).backward(step.grad); });
}

// packed: TRIAX_MAMBA2_SSD_PACKED_GRADIENT=1 (the default), which takes two casts and a cat fewer.
void expect_few_ops(bool packed) {
  const ScopedVariable setting("TRIAX_MAMBA2_SSD_PACKED_GRADIENT", packed ? "1" : "0");
  const OpCounts counts = mixer_step_ops();
  std::cout << "copy, fill, add and cat ops of one Mamba-2 mixer's forward + backward, by caller:\n";
  for (const auto& [name, count] : counts) std::cout << "  " << name << " " << count << "\n";
  const std::vector<std::string> layout_ops{"aten::contiguous",     "aten::clone",           "aten::reshape",
                                            "aten::slice_backward", "aten::select_backward", "aten::constant_pad_nd"};
  const int64_t copies = total(counts, "aten::copy_", layout_ops), casts = total(counts, "aten::copy_", {"aten::to"});
  const int64_t fills = total(counts, "aten::zero_", {"aten::zeros", "aten::slice_backward", "aten::select_backward"}) +
                        total(counts, "aten::fill_", {"aten::zeros", "aten::slice_backward", "aten::select_backward"});
  const int64_t adds = total(counts, "aten::add", {}) + total(counts, "aten::add_", {});
  const int64_t cats = total(counts, "aten::cat", {"aten::stack"});
  std::cout << "copies " << copies << ", casts " << casts << ", fills " << fills << ", adds " << adds << ", cats "
            << cats << "\n";
  // Before the split_with_sizes splits and the SSD's one-pass products (main, 2026-12-07): copies
  // 24, casts 77, fills 13, adds 21, cats 3 (docs/mamba2-performance.md). Before the packed SSD
  // gradient (TRIAX_MAMBA2_SSD_PACKED_GRADIENT, on by default) and one cast of the entering
  // states: casts 64, cats 5; with the packed gradient on, two casts and a cat fewer.
  EXPECT_LE(copies, 12);
  EXPECT_LE(casts, packed ? 61 : 63);
  EXPECT_LE(fills, 3);
  EXPECT_LE(adds, 13);
  EXPECT_LE(cats, packed ? 4 : 5);
}

TEST(Mamba2LayerOps, CopiesFillsAndAddsAroundTheScanStayFew) { expect_few_ops(false); }

TEST(Mamba2LayerOps, ThePackedGradientTakesTwoCastsAndACatFewer) { expect_few_ops(true); }

}  // namespace
