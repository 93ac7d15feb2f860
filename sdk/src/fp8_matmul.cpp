#include "fp8_matmul.hpp"

#include <ATen/ATen.h>

#ifdef TRIAX_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>

#include "recorded_amax.hpp"
#include "triax/kernels/cuda_launch.hpp"
#endif

#include <cstdint>
#include <limits>

#include "triax/error.hpp"

namespace triax::fp8 {
namespace {

// fp8(t x multiplier) in the layouts asked for: from one read where the kernels apply (the
// multiplier stays on the device), else through LibTorch (the product computed in fp32 and stored
// as fp8, then transposed): one rounding either way, to the same values.
void scale_to_fp8(const at::Tensor& t, const at::Tensor& multiplier, c10::ScalarType format, Layout layout,
                  Fp8Matrix& m) {
  const bool transposed = layout != Layout::RowMajor;
#ifdef TRIAX_WITH_CUDA
  if (cuda_launch::kernels_apply({&t}) && t.is_contiguous()) {
    const bool row_major = layout != Layout::Transposed;
    const at::Tensor factor = multiplier.contiguous();
    const int64_t rows = t.size(0), cols = t.size(1);
    if (row_major) m.data = at::empty({rows, cols}, t.options().dtype(format));
    if (transposed) m.transposed = at::empty({cols, rows}, t.options().dtype(format));
    cuda_launch::check(kernels::scale_to_fp8(*cuda_launch::kernel_dtype(t.scalar_type()), t.data_ptr(),
                                             factor.data_ptr<float>(), factor.size(0) > 1 ? 1 : 0,
                                             factor.size(1) > 1 ? 1 : 0, format == c10::ScalarType::Float8_e5m2,
                                             row_major ? m.data.data_ptr() : nullptr,
                                             transposed ? m.transposed.data_ptr() : nullptr, rows, cols,
                                             cuda_launch::stream_of(t)),
                       "scale_to_fp8");
    return;
  }
#endif
  m.data = at::empty(t.sizes(), t.options().dtype(format));
  at::mul_out(m.data, t, multiplier);
  if (transposed) m.transposed = m.data.t().contiguous();
}

#ifdef TRIAX_WITH_CUDA
// Rowwise e4m3 scales whose amax spans no split dimension, in the one layout the rowwise recipe
// asks for (fp8_linear.cpp): per row, row-major (x and gy of the forward and grad_x products, the
// weight's rows) or per column, transposed (W for grad_x, gy and x for grad_W). One kernel reads
// t for the amax and the cast where LibTorch takes a reduction, five scale ops and the cast
// (kernels/fp8_grouped_cast.cu, the experts' rowwise casts, a dense matrix being one group of
// rows); the same bytes and scales. False where they do not apply.
bool rowwise_in_one_kernel(const at::Tensor& t, const Scaling& scaling, const TensorParallel& tp, Layout layout,
                           Fp8Matrix& m) {
  const bool per_row = scaling.amax_dim == 1 && layout == Layout::RowMajor;
  const bool per_column = scaling.amax_dim == 0 && layout == Layout::Transposed;
  const int64_t rows = t.size(0), cols = t.size(1);
  if (!(per_row || per_column) || scaling.format != c10::ScalarType::Float8_e4m3fn ||
      (scaling.across_tp && tp.size > 1) || !cuda_launch::kernels_apply({&t}) || !t.is_contiguous() ||
      !aligned_for_cublaslt(t) || cols % 8 != 0 || (per_column && rows % 16 != 0) || rows == 0)
    return false;
  const kernels::StackedRows source{t.const_data_ptr(), rows};
  const auto largest = static_cast<float>(largest_value(scaling.format));
  const auto floor = static_cast<float>(kAmaxFloor);
  const cudaStream_t stream = cuda_launch::stream_of(t);
  const kernels::Dtype dtype = *cuda_launch::kernel_dtype(t.scalar_type());
  if (per_row) {
    m.data = at::empty({rows, cols}, t.options().dtype(scaling.format));
    m.scale = at::empty({rows, 1}, t.options().dtype(at::kFloat));
    cuda_launch::check(kernels::fp8_rowwise_cast(dtype, source, rows, cols, largest, floor, m.data.data_ptr(),
                                                 m.scale.data_ptr<float>(), stream),
                       "fp8_rowwise_cast");
    return true;
  }
  m.transposed = at::empty({cols, rows}, t.options().dtype(scaling.format));
  m.scale = at::empty({1, cols}, t.options().dtype(at::kFloat));
  const at::Tensor multipliers = at::empty({cols}, t.options().dtype(at::kFloat));
  const kernels::RowGroupsOnDevice one_group{nullptr, rows, 1};
  cuda_launch::check(kernels::fp8_group_column_cast(dtype, source, rows, cols, one_group, /*per_group_transpose=*/false,
                                                    largest, floor, multipliers.data_ptr<float>(),
                                                    m.transposed.data_ptr(), m.scale.data_ptr<float>(), stream),
                     "fp8_group_column_cast");
  return true;
}

// The tensorwise scales of a contiguous CUDA tensor: {scale, multiplier, amax} in one allocation,
// the scale at its start (cuBLASLt refuses a scale that is not 16-byte aligned, and
// at::_scaled_mm passes it as it is). From the amax its producer recorded (recorded_amax.hpp), one
// warp; else one kernel over the whole tensor (fp8_amax.cu). Where the amax spans split
// dimensions it is all-reduced first, as any other.
ScaleAndMultiplier tensor_scales_on_device(const at::Tensor& t, const Scaling& scaling, const TensorParallel& tp) {
  const at::Tensor out = at::empty({3}, t.options().dtype(at::kFloat));
  const float largest = static_cast<float>(largest_value(scaling.format));
  const cudaStream_t stream = cuda_launch::stream_of(t);
  if (const at::Tensor slots = recorded_amax(t); slots.defined()) {
    cuda_launch::check(kernels::fp8_scale_from_amax_slots(slots.data_ptr<float>(), largest,
                                                          static_cast<float>(kAmaxFloor), out.data_ptr<float>(), stream),
                       "fp8_scale_from_amax_slots");
  } else {
    // The block maxima and ticket.
    const at::Tensor workspace = at::empty({kernels::kFp8ScaleBlocks + 1}, t.options().dtype(at::kFloat));
    cuda_launch::check(kernels::fp8_tensor_scale(*cuda_launch::kernel_dtype(t.scalar_type()), t.data_ptr(), t.numel(),
                                                 largest, static_cast<float>(kAmaxFloor), workspace.data_ptr<float>(),
                                                 out.data_ptr<float>(), stream),
                       "fp8_tensor_scale");
  }
  if (scaling.across_tp && tp.size > 1) return scales_from_amax(out.narrow(0, 2, 1).view({1, 1}), scaling, tp);
  return {out.narrow(0, 0, 1).view({1, 1}), out.narrow(0, 1, 1).view({1, 1})};
}
#endif

// max |t| in one reduction, in t's dtype (exact: it is one of t's values), then the scales. A
// whole contiguous CUDA tensor takes the device's kernels for all of it.
ScaleAndMultiplier scales_of(const at::Tensor& t, const Scaling& scaling, const TensorParallel& tp) {
  const double inf = std::numeric_limits<double>::infinity();
#ifdef TRIAX_WITH_CUDA
  if (scaling.amax_dim < 0 && cuda_launch::kernels_apply({&t}) && t.is_contiguous())
    return tensor_scales_on_device(t, scaling, tp);
#endif
  const at::Tensor amax = scaling.amax_dim < 0
                              ? at::linalg_vector_norm(t, inf, at::IntArrayRef{0, 1}, /*keepdim=*/true)
                              : at::linalg_vector_norm(t, inf, at::IntArrayRef{scaling.amax_dim}, /*keepdim=*/true);
  return scales_from_amax(amax, scaling, tp);
}

}  // namespace

double largest_value(c10::ScalarType format) { return format == c10::ScalarType::Float8_e5m2 ? 57344.0 : 448.0; }

ScaleAndMultiplier scales_from_amax(at::Tensor amax, const Scaling& scaling, const TensorParallel& tp) {
  amax = amax.to(at::kFloat).contiguous();
  if (scaling.across_tp && tp.size > 1) tp.host.all_reduce(TRIAX_GROUP_TP, amax, TRIAX_REDUCE_MAX);
  amax.clamp_min_(kAmaxFloor);
  const double largest = largest_value(scaling.format);
  // Scaled by largest / amax, no value exceeds the format's largest by more than fp32's rounding.
  return {amax / largest, amax.reciprocal() * largest};
}

Fp8Matrix quantise(const at::Tensor& t, const Scaling& scaling, const TensorParallel& tp, Layout layout) {
  if (t.dim() != 2) throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "fp8 quantise: expected a matrix");
#ifdef TRIAX_WITH_CUDA
  if (Fp8Matrix fused; rowwise_in_one_kernel(t, scaling, tp, layout, fused)) return fused;
#endif
  const ScaleAndMultiplier scales = scales_of(t, scaling, tp);
  Fp8Matrix m;
  m.scale = scales.scale;
  scale_to_fp8(t, scales.multiplier, scaling.format, layout, m);
  return m;
}

bool aligned_for_cublaslt(const at::Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 16 == 0; }

at::Tensor scaled_matmul(const at::Tensor& a, const at::Tensor& a_scale, const at::Tensor& b, const at::Tensor& b_scale,
                         c10::ScalarType out_dtype, bool fast_accumulation) {
  if (!a.is_cuda()) {
    // The CPU emulates: the same fp8 values and scales, the product in fp32.
    return at::mm(a.to(at::kFloat) * a_scale, b.to(at::kFloat) * b_scale).to(out_dtype);
  }
  const at::Tensor lhs = a.contiguous();
  const at::Tensor rhs = b.t().contiguous().t();  // column-major
  const at::Tensor lhs_scale = a_scale.contiguous(), rhs_scale = b_scale.contiguous();
  for (const at::Tensor* operand : {&lhs, &rhs, &lhs_scale, &rhs_scale})
    if (!aligned_for_cublaslt(*operand))
      throw Error(TRIAX_ERROR_RUNTIME, "fp8 scaled_matmul: an operand or scale is not 16-byte aligned");
  const bool rowwise = a_scale.numel() > 1 || b_scale.numel() > 1;
  // The rowwise kernels write bf16 only.
  const c10::ScalarType product_dtype = rowwise ? at::kBFloat16 : out_dtype;
  at::Tensor product =
      at::_scaled_mm(lhs, rhs, lhs_scale, rhs_scale, std::nullopt, std::nullopt, product_dtype, fast_accumulation);
  return product.scalar_type() == out_dtype ? product : product.to(out_dtype);
}

at::Tensor pad_columns_to_16(const at::Tensor& fp8_rows) {
  const int64_t padding = (16 - fp8_rows.size(1) % 16) % 16;
  if (padding == 0 || !fp8_rows.is_cuda()) return fp8_rows;
  // Through bytes: a zero byte is +0 in both fp8 formats.
  return at::constant_pad_nd(fp8_rows.view(at::kByte), {0, padding}, 0).view(fp8_rows.scalar_type());
}

void require_fp8_device(const c10::Device& device, const std::string& key) {
  if (!device.is_cuda()) return;  // the CPU emulates
#ifdef TRIAX_WITH_CUDA
  const int index = device.has_index() ? device.index() : at::cuda::current_device();
  const cudaDeviceProp* properties = at::cuda::getDeviceProperties(index);
  const int capability = properties->major * 10 + properties->minor;
  if (capability < 89)
    throw Error(TRIAX_ERROR_INVALID_CONFIG,
                key + ": fp8 training needs a GPU with fp8 tensor cores (compute capability 8.9 or newer); " +
                    device.str() + " (" + properties->name + ") is " + std::to_string(properties->major) + "." +
                    std::to_string(properties->minor));
#else
  throw Error(TRIAX_ERROR_INVALID_CONFIG, key + ": this build of triax has no CUDA support for " + device.str());
#endif
}

}  // namespace triax::fp8
