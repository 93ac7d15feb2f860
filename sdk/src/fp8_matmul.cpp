#include "fp8_matmul.hpp"

#include <ATen/ATen.h>

#ifdef TRIAX_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>

#include "triax/kernels/cuda_launch.hpp"
#endif

#include <limits>

#include "triax/error.hpp"

namespace triax::fp8 {
namespace {

double largest_value(c10::ScalarType format) {
  return format == c10::ScalarType::Float8_e5m2 ? 57344.0 : 448.0;
}

// The smallest amax a scale is computed from: an all-zero tensor gets a finite scale.
constexpr double kAmaxFloor = 1e-12;

// data = fp8(t x multiplier), in one pass where the kernels apply (the multiplier stays on the
// device), else through LibTorch: the product computed in fp32 and stored as fp8, one rounding
// either way.
at::Tensor scaled_to_fp8(const at::Tensor& t, const at::Tensor& multiplier, c10::ScalarType format) {
  at::Tensor data = at::empty(t.sizes(), t.options().dtype(format));
#ifdef TRIAX_WITH_CUDA
  if (cuda_launch::kernels_apply({&t}) && t.is_contiguous()) {
    const at::Tensor m = multiplier.contiguous();
    const int64_t row_stride = m.size(0) > 1 ? 1 : 0, col_stride = m.size(1) > 1 ? 1 : 0;
    cuda_launch::check(kernels::scale_to_fp8(*cuda_launch::kernel_dtype(t.scalar_type()), t.data_ptr(),
                                             m.data_ptr<float>(), row_stride, col_stride,
                                             format == c10::ScalarType::Float8_e5m2, data.data_ptr(), t.size(0),
                                             t.size(1), cuda_launch::stream_of(t)),
                       "scale_to_fp8");
    return data;
  }
#endif
  at::mul_out(data, t, multiplier);
  return data;
}

}  // namespace

Fp8Matrix quantise(const at::Tensor& t, const Scaling& scaling, const TensorParallel& tp) {
  if (t.dim() != 2) throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "fp8 quantise: expected a matrix");
  // max |t| in one reduction, in t's dtype (exact: it is one of t's values), then fp32.
  const double inf = std::numeric_limits<double>::infinity();
  at::Tensor amax = scaling.amax_dim < 0
                        ? at::linalg_vector_norm(t, inf, at::IntArrayRef{0, 1}, /*keepdim=*/true)
                        : at::linalg_vector_norm(t, inf, at::IntArrayRef{scaling.amax_dim}, /*keepdim=*/true);
  amax = amax.to(at::kFloat).contiguous();
  if (scaling.across_tp && tp.size > 1) tp.host.all_reduce(TRIAX_GROUP_TP, amax, TRIAX_REDUCE_MAX);
  amax.clamp_min_(kAmaxFloor);
  const double largest = largest_value(scaling.format);
  // Scaled by largest / amax, no value exceeds the format's largest by more than fp32's rounding.
  return {scaled_to_fp8(t, amax.reciprocal() * largest, scaling.format), amax / largest};
}

at::Tensor scaled_matmul(const Fp8Matrix& a, const Fp8Matrix& b, c10::ScalarType out_dtype, bool fast_accumulation) {
  if (!a.data.is_cuda()) {
    // The CPU emulates: the same fp8 values and scales, the product in fp32.
    const at::Tensor lhs = a.data.to(at::kFloat) * a.scale, rhs = b.data.to(at::kFloat) * b.scale;
    return at::mm(lhs, rhs).to(out_dtype);
  }
  const at::Tensor lhs = a.data.contiguous();
  const at::Tensor rhs = b.data.t().contiguous().t();  // column-major
  const bool rowwise = a.scale.numel() > 1 || b.scale.numel() > 1;
  // The rowwise kernels write bf16 only.
  const c10::ScalarType product_dtype = rowwise ? at::kBFloat16 : out_dtype;
  at::Tensor product = at::_scaled_mm(lhs, rhs, a.scale.contiguous(), b.scale.contiguous(), std::nullopt,
                                      std::nullopt, product_dtype, fast_accumulation);
  return product.scalar_type() == out_dtype ? product : product.to(out_dtype);
}

Fp8Matrix pad_rows_to_16(const Fp8Matrix& m) {
  const int64_t rows = m.data.size(0), padding = (16 - rows % 16) % 16;
  if (padding == 0 || !m.data.is_cuda()) return m;
  // Through bytes: a zero byte is +0 in both fp8 formats. The scales of the matrices padded here
  // (grad_weight's operands, scaled per tensor or per column) hold for the zero rows as they are.
  const at::Tensor bytes = at::constant_pad_nd(m.data.view(at::kByte), {0, 0, 0, padding}, 0);
  return {bytes.view(m.data.scalar_type()), m.scale};
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
