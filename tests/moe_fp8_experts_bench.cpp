// The MoE experts' forward + backward on one GPU in bf16 (at::_grouped_mm) against fp8
// (at::_scaled_grouped_mm with rowwise scales, docs/fp8.md "The MoE experts"), milliseconds per
// call and the ratio, at moe-1b's layer (8 experts, hidden 1024, intermediate 2048, one
// micro-batch of 8 x 2048 tokens routed top-2) and at twice its width. The routed counts are
// uneven (drawn from a skewed router). Then where the fp8 time goes, piece by piece (the padding,
// each operand's cast, the six grouped products), with the operand casts fused
// (TRIAX_FP8_GROUPED_FUSED_CASTS unset) and through LibTorch's composition (=0). Built only with
// -DTRIAX_CUDA=ON, not run by ctest:
//
//   moe_fp8_experts_bench
#include <ATen/ATen.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fp8_grouped_casts.hpp"
#include "gpu_timing.hpp"
#include "grouped_experts.hpp"
#include "triax/layers/fp8_grouped_linear.hpp"

namespace {

namespace grouped = triax::grouped_fp8;
using triax::fp8::Fp8Matrix;

struct ExpertsShape {
  const char* name;
  int64_t rows, experts, hidden, intermediate;
};

const ExpertsShape kShapes[] = {
    {"moe-1b", 8 * 2048 * 2, 8, 1024, 2048},
    {"moe-1b x2 wide", 8 * 2048 * 2, 8, 2048, 4096},
};

// Rows per expert for `rows` routed rows, from a softmax over N(0, 0.5^2) logits: some imbalance.
std::vector<int64_t> routed_counts(int64_t rows, int64_t experts) {
  at::manual_seed(1);
  const at::Tensor share = at::softmax(at::randn({experts}) * 0.5, 0);
  std::vector<int64_t> counts(static_cast<size_t>(experts));
  int64_t given = 0;
  for (int64_t e = 0; e + 1 < experts; ++e) given += counts[e] = static_cast<int64_t>(share[e].item<double>() * rows);
  counts.back() = rows - given;
  return counts;
}

struct Operands {
  at::Tensor rows, gate, up, down, grad;
};

// One at::_scaled_grouped_mm as fp8_grouped_linear.cpp calls it.
at::Tensor grouped_product(const at::Tensor& a, const at::Tensor& a_scale, const at::Tensor& b,
                           const at::Tensor& b_scale, const at::Tensor& ends, bool fast_accumulation) {
  return at::_scaled_grouped_mm(a, b, a_scale, b_scale, ends, std::nullopt, std::nullopt, at::kBFloat16,
                                fast_accumulation);
}

// The pieces of one fp8 forward + backward, timed one by one on the shapes they have in it: the
// operands of the gate/up product (x [M, H], gate and up [E, I, H], its gradient [M, 2I]) and of
// the down product (the activation [M, I], down [E, H, I], its gradient [M, H]).
std::vector<std::pair<std::string, double>> pieces(const Operands& o, const std::vector<int64_t>& counts) {
  const triax::moe::PaddedRows padded = triax::moe::pad_to_row_groups(o.rows, counts);
  const triax::Fp8RowGroups& groups = padded.groups;
  const int64_t m = groups.total(), e = o.up.size(0), inter = o.up.size(1), hidden = o.up.size(2);
  const at::TensorOptions options = o.rows.options();
  const at::Tensor x = padded.rows, act = at::randn({m, inter}, options), gy_down = at::randn({m, hidden}, options),
                   gy_gate_up = at::randn({m, 2 * inter}, options);
  std::vector<std::pair<std::string, double>> out;
  auto time = [&](const std::string& name, const std::function<void()>& f) {
    out.emplace_back(name, triax::bench::time_ms(f));
  };
  time("pad the rows (groups, index_copy)", [&] { triax::moe::pad_to_row_groups(o.rows, counts); });
  time("drop the padding (index_select)", [&] { x.index_select(0, padded.where); });
  time("x per row [M, H]", [&] { grouped::per_row(x); });
  time("gate + up per row over H", [&] { grouped::weights_per_row(o.gate, o.up); });
  time("activation per row [M, I]", [&] { grouped::per_row(act); });
  time("down per row over I", [&] { grouped::weights_per_row(o.down, {}); });
  time("down's gy per row [M, H]", [&] { grouped::per_row(gy_down); });
  time("down per column over H", [&] { grouped::weights_per_column(o.down, {}); });
  time("down's gy per group column", [&] { grouped::per_group_column(gy_down, groups); });
  time("activation per group column", [&] { grouped::per_group_column(act, groups); });
  time("gate/up's gy per row [M, 2I]", [&] { grouped::per_row(gy_gate_up); });
  time("gate + up per column over 2I", [&] { grouped::weights_per_column(o.gate, o.up); });
  time("gate/up's gy per group column", [&] { grouped::per_group_column(gy_gate_up, groups); });
  time("x per group column", [&] { grouped::per_group_column(x, groups); });
  // The six products on operands cast once (their time does not depend on the casts).
  const Fp8Matrix xq = grouped::per_row(x), gate_up = grouped::weights_per_row(o.gate, o.up),
                  actq = grouped::per_row(act), downq = grouped::weights_per_row(o.down, {}),
                  gyd = grouped::per_row(gy_down), down_t = grouped::weights_per_column(o.down, {}),
                  gyd_g = grouped::per_group_column(gy_down, groups), act_g = grouped::per_group_column(act, groups),
                  gyg = grouped::per_row(gy_gate_up), gate_up_t = grouped::weights_per_column(o.gate, o.up),
                  gyg_g = grouped::per_group_column(gy_gate_up, groups), x_g = grouped::per_group_column(x, groups);
  const at::Tensor& ends = groups.ends;
  time("6 grouped products (forward, grad_x, grad_W of each)", [&] {
    grouped_product(xq.data, xq.scale, gate_up.data.view({e, 2 * inter, hidden}).transpose(1, 2),
                    gate_up.scale.view({e, 2 * inter}), ends, true);
    grouped_product(actq.data, actq.scale, downq.data.view({e, hidden, inter}).transpose(1, 2),
                    downq.scale.view({e, hidden}), ends, true);
    grouped_product(gyd.data, gyd.scale, down_t.data.view({e, inter, hidden}).transpose(1, 2),
                    down_t.scale.view({e, inter}), ends, false);
    grouped_product(gyd_g.transposed, gyd_g.scale, act_g.transposed.t(), act_g.scale, ends, false);
    grouped_product(gyg.data, gyg.scale, gate_up_t.data.view({e, hidden, 2 * inter}).transpose(1, 2),
                    gate_up_t.scale.view({e, hidden}), ends, false);
    grouped_product(gyg_g.transposed, gyg_g.scale, x_g.transposed.t(), x_g.scale, ends, false);
  });
  return out;
}

void set_fused_casts(bool on) { setenv("TRIAX_FP8_GROUPED_FUSED_CASTS", on ? "1" : "0", 1); }

}  // namespace

int main() {
  if (!at::hasCUDA()) {
    std::fprintf(stderr, "moe_fp8_experts_bench: no CUDA device\n");
    return 1;
  }
  const at::TensorOptions options = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  std::vector<std::vector<std::pair<std::string, double>>> breakdowns[2];
  std::printf(
      "| shape | bf16 ms | fp8 ms, LibTorch casts | fp8 ms, fused casts | bf16/fp8 (fused) |\n"
      "|---|---|---|---|---|\n");
  for (const ExpertsShape& s : kShapes) {
    const std::vector<int64_t> counts = routed_counts(s.rows, s.experts);
    const Operands o{at::randn({s.rows, s.hidden}, options).requires_grad_(),
                     (at::randn({s.experts, s.intermediate, s.hidden}, options) * 0.02).requires_grad_(),
                     (at::randn({s.experts, s.intermediate, s.hidden}, options) * 0.02).requires_grad_(),
                     (at::randn({s.experts, s.hidden, s.intermediate}, options) * 0.02).requires_grad_(),
                     at::randn({s.rows, s.hidden}, options)};
    const std::string unavailable = triax::fp8_grouped_products_unavailable(o.rows, o.up);
    if (!unavailable.empty()) {
      std::fprintf(stderr, "moe_fp8_experts_bench: %s\n", unavailable.c_str());
      return 1;
    }
    auto step = [&](auto implementation) {
      return [&, implementation] {
        for (const at::Tensor& t : {o.rows, o.gate, o.up, o.down})
          const_cast<at::Tensor&>(t).mutable_grad() = at::Tensor();
        implementation(o.rows, counts, o.gate, o.up, o.down).backward(o.grad);
      };
    };
    const double bf16 = triax::bench::time_ms(step(triax::moe::experts_grouped_mm));
    double fp8[2];
    for (const bool fused : {false, true}) {
      set_fused_casts(fused);
      fp8[fused] = triax::bench::time_ms(step(triax::moe::experts_fp8_grouped_mm));
      at::NoGradGuard no_grad;
      breakdowns[fused].push_back(pieces(o, counts));
    }
    std::printf("| %s (%lld rows, %lld experts, %lld x %lld) | %.3f | %.3f | %.3f | %.2fx |\n", s.name,
                static_cast<long long>(s.rows), static_cast<long long>(s.experts), static_cast<long long>(s.hidden),
                static_cast<long long>(s.intermediate), bf16, fp8[0], fp8[1], bf16 / fp8[1]);
  }
  for (size_t shape = 0; shape < std::size(kShapes); ++shape) {
    std::printf(
        "\n%s, fp8 forward + backward by piece (ms)\n\n| piece | LibTorch casts (=0) | fused casts |\n"
        "|---|---|---|\n",
        kShapes[shape].name);
    const auto& composed = breakdowns[0][shape];
    const auto& fused = breakdowns[1][shape];
    for (size_t i = 0; i < composed.size(); ++i)
      std::printf("| %s | %.3f | %.3f |\n", composed[i].first.c_str(), composed[i].second, fused[i].second);
  }
  return 0;
}
