// The grouped products' fp8 operands (fp8_grouped_casts.hpp): LibTorch's composition, and the
// fused kernels (kernels/fp8_grouped_cast.cu) that give its bytes and scales in fewer passes.
#include "fp8_grouped_casts.hpp"

#include <ATen/ATen.h>

#ifdef TRIAX_WITH_CUDA
#include "triax/kernels/cuda_launch.hpp"
#endif

#include <atomic>
#include <initializer_list>
#include <limits>

#include "triax/environment_switch.hpp"

namespace triax::grouped_fp8 {
// Named: the SDK compiles in unity batches, beside fp8_grouped_linear.cpp's own anonymous names.
namespace casts {
namespace {

using fp8::Fp8Matrix;

constexpr c10::ScalarType kFormat = c10::ScalarType::Float8_e4m3fn;

// The experts' weights are whole on every rank (replicated over tp, split over ep by expert):
// no scale spans a split dimension.
const TensorParallel kWhole{};

std::atomic<int64_t> fused_casts{0};

// ---- LibTorch's composition ------------------------------------------------------------------

Fp8Matrix composed_per_row(const at::Tensor& t) {
  Fp8Matrix m = fp8::quantise(t, {kFormat, 1, false}, kWhole);
  m.scale = m.scale.reshape({-1});
  return m;
}

// The amax per block of 16 rows first (a group is whole blocks), then per group; each row is
// multiplied by its group's multiplier, then transposed.
Fp8Matrix composed_per_group_column(const at::Tensor& t, const Fp8RowGroups& groups) {
  const int64_t rows = t.size(0), cols = t.size(1), blocks = rows / kRowStep;
  const auto count = static_cast<int64_t>(groups.rows.size());
  const at::Tensor by_block = t.contiguous().view({blocks, kRowStep, cols});
  const at::Tensor block_amax =
      at::linalg_vector_norm(by_block, std::numeric_limits<double>::infinity(), at::IntArrayRef{1}, false);
  const at::Tensor group_amax = at::zeros({count, cols}, t.options().dtype(at::kFloat))
                                    .scatter_reduce_(0, groups.group_of_block.unsqueeze(1).expand({blocks, cols}),
                                                     block_amax.to(at::kFloat), "amax", /*include_self=*/true);
  const fp8::ScaleAndMultiplier scales = fp8::scales_from_amax(group_amax, {kFormat, 0, false}, kWhole);
  at::Tensor data = at::empty({blocks, kRowStep, cols}, t.options().dtype(kFormat));
  at::mul_out(data, by_block, scales.multiplier.index_select(0, groups.group_of_block).unsqueeze(1));
  Fp8Matrix m;
  m.transposed = data.view({rows, cols}).t().contiguous();
  m.scale = scales.scale.reshape({-1}).contiguous();
  return m;
}

// The weights stacked along N: first alone, or first and second concatenated.
at::Tensor stacked(const at::Tensor& first, const at::Tensor& second) {
  return second.defined() ? at::cat({first, second}, 1) : first;
}

// ---- the fused kernels -----------------------------------------------------------------------

#ifdef TRIAX_WITH_CUDA
// Whether the kernels take these operands as they lie (CUDA, one dtype the kernels handle,
// contiguous, 16-byte aligned, rows of whole 16-byte vectors); else the composition runs.
bool fused_casts_apply(std::initializer_list<const at::Tensor*> operands, int64_t cols) {
  if (!fused_casts_switched_on() || !cuda_launch::kernels_apply(operands) || cols % 8 != 0) return false;
  for (const at::Tensor* t : operands)
    if (!t->is_contiguous() || !fp8::aligned_for_cublaslt(*t)) return false;
  return true;
}

kernels::StackedRows stacked_rows(const at::Tensor& first, const at::Tensor& second) {
  if (!second.defined())
    return {first.const_data_ptr(), first.dim() == 3 ? first.size(0) * first.size(1) : first.size(0)};
  return {first.const_data_ptr(), first.size(1), second.const_data_ptr(), second.size(1)};
}

Fp8Matrix fused_per_row(const kernels::StackedRows& source, const at::Tensor& like, int64_t rows, int64_t cols) {
  fused_casts.fetch_add(1, std::memory_order_relaxed);
  Fp8Matrix m;
  m.data = at::empty({rows, cols}, like.options().dtype(kFormat));
  m.scale = at::empty({rows}, like.options().dtype(at::kFloat));
  cuda_launch::check(
      kernels::fp8_rowwise_cast(*cuda_launch::kernel_dtype(like.scalar_type()), source, rows, cols,
                                static_cast<float>(fp8::largest_value(kFormat)), static_cast<float>(fp8::kAmaxFloor),
                                m.data.data_ptr(), m.scale.data_ptr<float>(), cuda_launch::stream_of(like)),
      "fp8_rowwise_cast");
  return m;
}

// The transposed bytes into `out_t` ([cols, rows], or per group [groups * cols, rows per group]).
Fp8Matrix fused_per_group_column(const kernels::StackedRows& source, const at::Tensor& like, int64_t rows, int64_t cols,
                                 const kernels::RowGroupsOnDevice& groups, bool per_group_transpose, at::Tensor out_t) {
  fused_casts.fetch_add(1, std::memory_order_relaxed);
  Fp8Matrix m;
  m.scale = at::empty({groups.count * cols}, like.options().dtype(at::kFloat));
  const at::Tensor multipliers = at::empty({groups.count * cols}, like.options().dtype(at::kFloat));
  cuda_launch::check(
      kernels::fp8_group_column_cast(*cuda_launch::kernel_dtype(like.scalar_type()), source, rows, cols, groups,
                                     per_group_transpose, static_cast<float>(fp8::largest_value(kFormat)),
                                     static_cast<float>(fp8::kAmaxFloor), multipliers.data_ptr<float>(),
                                     out_t.data_ptr(), m.scale.data_ptr<float>(), cuda_launch::stream_of(like)),
      "fp8_group_column_cast");
  (per_group_transpose ? m.data : m.transposed) = std::move(out_t);
  return m;
}
#endif

}  // namespace
}  // namespace casts

bool fused_casts_switched_on() { return switched_on_unless_zero("TRIAX_FP8_GROUPED_FUSED_CASTS"); }

int64_t fused_casts_run() { return casts::fused_casts.load(std::memory_order_relaxed); }

fp8::Fp8Matrix per_row(const at::Tensor& t) {
#ifdef TRIAX_WITH_CUDA
  if (t.dim() == 2 && casts::fused_casts_apply({&t}, t.size(1)))
    return casts::fused_per_row(casts::stacked_rows(t, {}), t, t.size(0), t.size(1));
#endif
  return casts::composed_per_row(t);
}

fp8::Fp8Matrix per_group_column(const at::Tensor& t, const Fp8RowGroups& groups) {
#ifdef TRIAX_WITH_CUDA
  const at::Tensor& blocks = groups.group_of_block;
  if (casts::fused_casts_apply({&t}, t.size(1)) && blocks.device() == t.device() && blocks.is_contiguous() &&
      blocks.scalar_type() == at::kLong) {
    const int64_t rows = t.size(0), cols = t.size(1);
    const kernels::RowGroupsOnDevice on_device{blocks.const_data_ptr<int64_t>(), 0,
                                               static_cast<int64_t>(groups.rows.size())};
    return casts::fused_per_group_column(casts::stacked_rows(t, {}), t, rows, cols, on_device,
                                         /*per_group_transpose=*/false,
                                         at::empty({cols, rows}, t.options().dtype(casts::kFormat)));
  }
#endif
  return casts::composed_per_group_column(t, groups);
}

fp8::Fp8Matrix weights_per_row(const at::Tensor& first, const at::Tensor& second) {
  const int64_t experts = first.size(0), n = stacked_features(first, second), k = first.size(2);
#ifdef TRIAX_WITH_CUDA
  if (second.defined() ? casts::fused_casts_apply({&first, &second}, k) : casts::fused_casts_apply({&first}, k))
    return casts::fused_per_row(casts::stacked_rows(first, second), first, experts * n, k);
#endif
  return casts::composed_per_row(casts::stacked(first, second).reshape({experts * n, k}));
}

fp8::Fp8Matrix weights_per_column(const at::Tensor& first, const at::Tensor& second) {
  const int64_t experts = first.size(0), n = stacked_features(first, second), k = first.size(2);
#ifdef TRIAX_WITH_CUDA
  // Each expert's N rows are one group, transposed on their own: W_e^T [K, N] per expert.
  if ((second.defined() ? casts::fused_casts_apply({&first, &second}, k) : casts::fused_casts_apply({&first}, k)) &&
      n % kRowStep == 0) {
    const kernels::RowGroupsOnDevice uniform{nullptr, n, experts};
    return casts::fused_per_group_column(casts::stacked_rows(first, second), first, experts * n, k, uniform,
                                         /*per_group_transpose=*/true,
                                         at::empty({experts * k, n}, first.options().dtype(casts::kFormat)));
  }
#endif
  return casts::composed_per_row(casts::stacked(first, second).transpose(1, 2).contiguous().view({experts * k, n}));
}

}  // namespace triax::grouped_fp8
