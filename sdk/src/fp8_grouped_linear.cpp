// The grouped fp8 product's autograd function (triax/layers/fp8_grouped_linear.hpp).
//
// at::_scaled_grouped_mm (LibTorch 2.11, CUTLASS, sm_90/sm_100) takes a row-major, b column-major,
// both e4m3 with every dimension it reads along in multiples of 16, fp32 scales, int32 cumulative
// group ends, and writes bf16:
//   2d x 3d (forward, grad_x): a [M, K], b [E, K, N] (a column-major view of [E, N, K]),
//     scale_a [M], scale_b [E, N]; the groups split M.
//   2d x 2d (grad_W): a [N, M], b [M, K] (a column-major view of [K, M]), scale_a [E * N],
//     scale_b [E * K] (group-major); the groups split the contraction M: each group's rows a
//     multiple of 16 and none empty (the kernel asserts both), hence Fp8RowGroups' padding.
#include "triax/layers/fp8_grouped_linear.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#ifdef TRIAX_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include <algorithm>
#include <atomic>
#include <limits>
#include <optional>

#include "fp8_grouped_casts.hpp"
#include "fp8_matmul.hpp"
#include "triax/error.hpp"

namespace triax {
// A named namespace around the file's own names: the SDK compiles in unity batches, where another
// file's anonymous namespace (fp8_linear.cpp's kE4m3) shares the translation unit.
namespace grouped_fp8 {
namespace {

using fp8::Fp8Matrix;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::atomic<int64_t> scaled_grouped_products{0};

// The CPU's stand-in for at::_scaled_grouped_mm: the same operands and scales, dequantised, each
// group multiplied in fp32.
at::Tensor emulated_grouped_mm(const at::Tensor& a, const at::Tensor& a_scale, const at::Tensor& b,
                               const at::Tensor& b_scale, const Fp8RowGroups& groups) {
  std::vector<at::Tensor> products;
  const auto count = static_cast<int64_t>(groups.rows.size());
  int64_t start = 0;
  for (int64_t g = 0; g < count; ++g) {
    const int64_t rows = groups.rows[static_cast<size_t>(g)];
    if (b.dim() == 3) {  // the groups split a's rows
      products.push_back(at::mm(a.narrow(0, start, rows).to(at::kFloat) * a_scale.narrow(0, start, rows).unsqueeze(1),
                                b[g].to(at::kFloat) * b_scale[g].unsqueeze(0)));
    } else {  // the groups split the contraction
      const at::Tensor sa = a_scale.view({count, -1})[g], sb = b_scale.view({count, -1})[g];
      products.push_back(at::mm(a.narrow(1, start, rows).to(at::kFloat) * sa.unsqueeze(1),
                                b.narrow(0, start, rows).to(at::kFloat) * sb.unsqueeze(0)));
    }
    start += rows;
  }
  return b.dim() == 3 ? at::cat(products, 0) : at::stack(products, 0);
}

at::Tensor scaled_grouped_mm(const at::Tensor& a, const at::Tensor& a_scale, const at::Tensor& b,
                             const at::Tensor& b_scale, const Fp8RowGroups& groups, c10::ScalarType out_dtype,
                             bool fast_accumulation) {
  if (!a.is_cuda()) return emulated_grouped_mm(a, a_scale, b, b_scale, groups).to(out_dtype);
  for (const at::Tensor* operand : {&a, &b, &a_scale, &b_scale})
    if (!fp8::aligned_for_cublaslt(*operand))
      throw Error(TRIAX_ERROR_RUNTIME, "fp8 grouped product: an operand or scale is not 16-byte aligned");
  at::Tensor product = at::_scaled_grouped_mm(a, b, a_scale, b_scale, groups.ends, std::nullopt, std::nullopt,
                                              at::kBFloat16, fast_accumulation);
  scaled_grouped_products.fetch_add(1, std::memory_order_relaxed);
  return product.scalar_type() == out_dtype ? product : product.to(out_dtype);
}

Fp8RowGroups saved_groups(AutogradContext* ctx) {
  Fp8RowGroups groups;
  groups.rows = ctx->saved_data["rows"].toIntVector();
  groups.ends = ctx->saved_data["ends"].toTensor();
  groups.group_of_block = ctx->saved_data["group_of_block"].toTensor();
  return groups;
}

class Fp8GroupedLinearFunction : public torch::autograd::Function<Fp8GroupedLinearFunction> {
 public:
  // x [M, K], first [E, N1, K] and second [E, N2, K] or undefined -> [M, N1 + N2].
  // (An undefined tensor cannot be an autograd input: `second` is absent rather than undefined.)
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& first,
                            const std::optional<at::Tensor>& maybe_second, const Fp8RowGroups& groups) {
    const at::Tensor second = maybe_second.value_or(at::Tensor());
    const int64_t experts = first.size(0), n = stacked_features(first, second), k = first.size(2);
    const Fp8Matrix xq = per_row(x);
    const Fp8Matrix wq = weights_per_row(first, second);
    // Forward with the faster accumulation, as the dense fp8 layers' forward.
    at::Tensor y = scaled_grouped_mm(xq.data, xq.scale, wq.data.view({experts, n, k}).transpose(1, 2),
                                     wq.scale.view({experts, n}), groups, x.scalar_type(), /*fast_accumulation=*/true);
    ctx->saved_data["rows"] = groups.rows;
    ctx->saved_data["ends"] = groups.ends;
    ctx->saved_data["group_of_block"] = groups.group_of_block;
    // Rowwise scales depend on the contraction: backward quantises x and the weights again. The
    // parameters are kept, not their concatenation (which would double the weights' memory).
    ctx->save_for_backward({x, first, second});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& first = saved[1];
    const at::Tensor& second = saved[2];
    const Fp8RowGroups groups = saved_groups(ctx);
    const at::Tensor grad_y = grads[0].contiguous();
    at::Tensor grad_x, grad_weights;
    if (ctx->needs_input_grad(0)) {
      // gy [M, N] per row; W [E, N, K] per column over N, stored [E, K, N] (read column-major).
      const int64_t experts = first.size(0), n = stacked_features(first, second), k = first.size(2);
      const Fp8Matrix gq = per_row(grad_y);
      const Fp8Matrix wq = weights_per_column(first, second);
      grad_x = scaled_grouped_mm(gq.data, gq.scale, wq.data.view({experts, k, n}).transpose(1, 2),
                                 wq.scale.view({experts, k}), groups, x.scalar_type(), /*fast_accumulation=*/false);
    }
    // needs_input_grad counts the tensors given: index 2 exists only with `second`.
    if (!ctx->needs_input_grad(1) && !(second.defined() && ctx->needs_input_grad(2)))
      return {grad_x, at::Tensor(), at::Tensor(), at::Tensor()};
    // gy^T [N, M] and x [M, K] (stored [K, M]), scaled per column over each group's rows.
    const Fp8Matrix gq = per_group_column(grad_y, groups);
    const Fp8Matrix xq = per_group_column(x, groups);
    grad_weights = scaled_grouped_mm(gq.transposed, gq.scale, xq.transposed.t(), xq.scale, groups, first.scalar_type(),
                                     /*fast_accumulation=*/false);
    if (!second.defined()) return {grad_x, grad_weights, at::Tensor(), at::Tensor()};
    const int64_t n1 = first.size(1);
    return {grad_x, grad_weights.narrow(1, 0, n1), grad_weights.narrow(1, n1, second.size(1)), at::Tensor()};
  }
};

}  // namespace
}  // namespace grouped_fp8

Fp8GroupedProducts::~Fp8GroupedProducts() = default;

int64_t Fp8RowGroups::padded(int64_t count) {
  return std::max<int64_t>(grouped_fp8::kRowStep,
                           (count + grouped_fp8::kRowStep - 1) / grouped_fp8::kRowStep * grouped_fp8::kRowStep);
}

Fp8RowGroups Fp8RowGroups::of(std::vector<int64_t> rows, const c10::Device& device) {
  std::vector<int32_t> ends;
  std::vector<int64_t> group_of_block;
  int64_t end = 0;
  for (size_t g = 0; g < rows.size(); ++g) {
    if (rows[g] < grouped_fp8::kRowStep || rows[g] % grouped_fp8::kRowStep != 0)
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "fp8 grouped product: group " + std::to_string(g) + " has " +
                                                    std::to_string(rows[g]) + " rows, not a positive multiple of 16");
    end += rows[g];
    if (end > std::numeric_limits<int32_t>::max())
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "fp8 grouped product: more rows than int32 offsets hold");
    ends.push_back(static_cast<int32_t>(end));
    group_of_block.insert(group_of_block.end(), static_cast<size_t>(rows[g] / grouped_fp8::kRowStep),
                          static_cast<int64_t>(g));
  }
  Fp8RowGroups groups;
  groups.rows = std::move(rows);
  groups.ends = at::tensor(ends, at::TensorOptions().dtype(at::kInt)).to(device, /*non_blocking=*/true);
  groups.group_of_block = at::tensor(group_of_block, at::TensorOptions().dtype(at::kLong)).to(device, true);
  return groups;
}

int64_t Fp8RowGroups::total() const {
  int64_t sum = 0;
  for (int64_t r : rows) sum += r;
  return sum;
}

at::Tensor fp8_grouped_linear(const at::Tensor& x, const at::Tensor& weights, const Fp8RowGroups& groups,
                              const at::Tensor& more_weights) {
  auto fits = [&](const at::Tensor& w) {
    return w.dim() == 3 && w.size(2) == x.size(1) && w.size(0) == static_cast<int64_t>(groups.rows.size());
  };
  if (x.dim() != 2 || x.size(0) != groups.total() || !fits(weights) || (more_weights.defined() && !fits(more_weights)))
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "fp8_grouped_linear: expected x [rows of the groups, K] and weights [groups, N, K]");
  const std::optional<at::Tensor> second =
      more_weights.defined() ? std::optional<at::Tensor>(more_weights) : std::nullopt;
  return grouped_fp8::Fp8GroupedLinearFunction::apply(x, weights, second, groups);
}

std::string fp8_grouped_products_unavailable(const at::Tensor& x, const at::Tensor& weights) {
  if (!x.is_cuda()) return "at::_scaled_grouped_mm is CUDA-only and the rows are on " + x.device().str();
  if (x.scalar_type() != at::kBFloat16 || weights.scalar_type() != at::kBFloat16)
    return "the grouped fp8 product is wired for bf16 rows and weights";
  if (x.size(-1) % grouped_fp8::kRowStep != 0 || weights.size(1) % grouped_fp8::kRowStep != 0)
    return "the products' sides are not multiples of 16";
#ifdef TRIAX_WITH_CUDA
  const cudaDeviceProp* properties = at::cuda::getDeviceProperties(x.device().index());
  if (properties->major != 9 && properties->major != 10)
    return std::string("at::_scaled_grouped_mm runs on compute capability 9.x and 10.x only; ") + properties->name +
           " is " + std::to_string(properties->major) + "." + std::to_string(properties->minor);
  return {};
#else
  return "this build of triax has no CUDA support";
#endif
}

int64_t fp8_scaled_grouped_products() { return grouped_fp8::scaled_grouped_products.load(std::memory_order_relaxed); }

}  // namespace triax
