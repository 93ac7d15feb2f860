#include "ssd_backward_cuda.hpp"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>

#include <string>

#include "ssd_backward_kernels.hpp"
#include "triax/environment_switch.hpp"
#include "triax/kernels/cuda_launch.hpp"

namespace triax::mamba2::ssd {
namespace {

namespace launch = triax::cuda_launch;
using launch::fp32_operand;  // a no-op for the products' outputs

kernels::TermsShape terms_shape_of(const Chunks& k) { return {k.b, k.c, k.g, k.r, k.p, k.q, k.l}; }

bool unit_channel_stride(const at::Tensor& t) { return t.stride(-1) == 1 || t.size(-1) == 1; }

// t [b, c, g, q, r, p] in a kernel dtype with unit channel stride, as the kernels index it (a view
// such as chunked_grad_y's is read in place); else a copy.
at::Tensor chunked_view_operand(const at::Tensor& t) {
  const at::Tensor typed = launch::kernel_dtype(t.scalar_type()) ? t : t.to(at::kFloat);
  return unit_channel_stride(typed) ? typed : typed.contiguous();
}

kernels::ChunkedStrides chunked_strides(const at::Tensor& t) {
  return {t.stride(0), t.stride(1), t.stride(2), t.stride(3), t.stride(4)};
}

void expect_chunked(const at::Tensor& t, const Chunks& k, const char* what) {
  if (t.dim() != 6 || t.size(0) != k.b || t.size(1) != k.c || t.size(2) != k.g || t.size(3) != k.q ||
      t.size(4) != k.r || t.size(5) != k.p)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                std::string(what) + ": expected [b, c, g, q, r, p] in the chunks' layout");
}

}  // namespace

bool ssd_backward_fused_applies(const Chunks& k) {
  return switched_on_unless_zero("TRIAX_MAMBA2_SSD_BACKWARD_FUSED") && fused_kernels_enabled() && k.dt.is_cuda() &&
         k.type == at::kFloat && launch::kernel_dtype(k.operand).has_value() &&
         k.b * k.c * k.g * k.q * k.r <= kernels::kMaxTermsPairs;
}

at::Tensor chunk_states_terms_cuda(const Chunks& k, const at::Tensor& dweighted, const at::Tensor& to_end,
                                   at::Tensor& d_xdt) {
  expect_chunked(d_xdt, k, "chunk_states_terms_cuda");
  if (d_xdt.scalar_type() != at::kFloat)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "chunk_states_terms_cuda: d_xdt must be fp32 (updated in place)");
  if (!unit_channel_stride(d_xdt)) d_xdt = d_xdt.contiguous();
  c10::cuda::CUDAGuard device(k.dt.device());
  const at::Tensor d = fp32_operand(dweighted), w = fp32_operand(to_end), xdt = k.xdt.contiguous();
  at::Tensor dw = at::empty({k.b, k.c, k.g, k.r, k.q}, w.options());
  launch::check(
      kernels::chunk_states_terms(*launch::kernel_dtype(k.operand), d.const_data_ptr<float>(), xdt.const_data_ptr(),
                                  w.const_data_ptr<float>(), d_xdt.data_ptr<float>(), chunked_strides(d_xdt),
                                  dw.data_ptr<float>(), terms_shape_of(k), launch::stream_of(d)),
      "chunk_states_terms");
  return dw;
}

ReadOutTerms read_out_terms_cuda(const Chunks& k, const at::Tensor& dy, const at::Tensor& from_start,
                                 const at::Tensor& read) {
  expect_chunked(dy, k, "read_out_terms_cuda");
  c10::cuda::CUDAGuard device(k.dt.device());
  const at::Tensor d_y = chunked_view_operand(dy), f = fp32_operand(from_start), r = fp32_operand(read);
  at::Tensor dread = at::empty({k.b, k.c, k.g, k.q, k.r * k.p}, r.options().dtype(k.operand));
  at::Tensor decay = at::empty({k.b, k.c, k.g, k.r, k.q}, f.options());
  launch::check(kernels::read_out_terms(*launch::kernel_dtype(d_y.scalar_type()), *launch::kernel_dtype(k.operand),
                                        d_y.const_data_ptr(), chunked_strides(d_y), f.const_data_ptr<float>(),
                                        r.const_data_ptr<float>(), dread.data_ptr(), decay.data_ptr<float>(),
                                        terms_shape_of(k), launch::stream_of(r)),
                "read_out_terms");
  return {dread, decay};
}

InputTerms input_terms_cuda(const Chunks& k, const at::Tensor& d_xdt, const at::Tensor& x) {
  if (!launch::kernel_dtype(x.scalar_type()))
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "input_terms_cuda: x in a dtype the kernels do not take");
  expect_chunked(d_xdt, k, "input_terms_cuda");
  c10::cuda::CUDAGuard device(k.dt.device());
  const at::Tensor d = chunked_view_operand(d_xdt.to(at::kFloat)), dt = fp32_operand(k.dt);
  const at::Tensor x_in = x.stride(3) == 1 ? x : x.contiguous();
  const kernels::InputStrides strides{x_in.stride(0), x_in.stride(1), x_in.stride(2)};
  at::Tensor dx = at::empty({k.b, k.l, k.g * k.r, k.p}, x_in.options().memory_format(at::MemoryFormat::Contiguous));
  at::Tensor d_dt = at::empty({k.b, k.l, k.g * k.r}, dt.options());
  launch::check(kernels::input_terms(*launch::kernel_dtype(x.scalar_type()), d.const_data_ptr<float>(),
                                     chunked_strides(d), x_in.const_data_ptr(), strides, dt.const_data_ptr<float>(),
                                     dx.data_ptr(), d_dt.data_ptr<float>(), terms_shape_of(k), launch::stream_of(d)),
                "input_terms");
  return {dx, d_dt};
}

}  // namespace triax::mamba2::ssd
