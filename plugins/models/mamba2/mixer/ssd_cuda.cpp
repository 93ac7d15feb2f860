#include "ssd_cuda.hpp"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>

#include <cstdint>

#include "scaled_rows.hpp"
#include "ssd_kernels.hpp"
#include "triax/environment_switch.hpp"
#include "triax/kernels/cuda_launch.hpp"

namespace triax::mamba2::ssd {
namespace {

namespace launch = triax::cuda_launch;
using launch::contiguous_aligned;
using launch::fp32_operand;
using launch::fp32_or_null;

constexpr const char* kChunkScanKernel = "TRIAX_MAMBA2_CHUNK_SCAN_KERNEL";

// The backward keeps r x 256 fp32 column sums a block in shared memory (up to 227 KiB).
constexpr int64_t kMaxHeadsPerGroup = 200;

kernels::ChunkShape shape_of(const Chunks& k) { return {k.b * k.c * k.g, k.r, k.q}; }

kernels::PassingShape passing_shape_of(const Chunks& k) { return {k.b, k.c, k.g * k.r, k.p * k.n}; }

// Each chunk's log-decay, [b, c, g, r] contiguous: the last cumulative one.
at::Tensor chunk_decays(const Chunks& k) { return k.decay.select(-1, k.q - 1).contiguous(); }

kernels::ChunkScanShape chunk_scan_shape_of(const Chunks& k) { return {k.b, k.c, k.g, k.r, k.p, k.n, k.q, k.l}; }

// A view's row strides as the scaled rows kernel takes them (in elements, the row dims).
kernels::RowStrides row_strides(const at::Tensor& t) {
  kernels::RowStrides s{};
  for (int d = 0; d < kernels::kScaledRowsDims; ++d) s.dim[d] = t.stride(d);
  return s;
}

// t with leading dims of one added up to the kernel's kScaledRowsDims + 1 (t has at most that many).
at::Tensor as_rows(const at::Tensor& t) {
  at::Tensor rows = t;
  while (rows.dim() < kernels::kScaledRowsDims + 1) rows = rows.unsqueeze(0);
  return rows;
}

kernels::ScaledRowsShape rows_shape(const at::Tensor& t) {
  kernels::ScaledRowsShape shape{};
  for (int d = 0; d < kernels::kScaledRowsDims; ++d) shape.rows[d] = t.size(d);
  shape.width = t.size(-1);
  return shape;
}

}  // namespace

bool ssd_kernels_apply(const Chunks& k) {
  static const bool switched_on = switched_on_unless_zero("TRIAX_MAMBA2_SSD_KERNELS");
  return switched_on && fused_kernels_enabled() && k.dt.is_cuda() && k.type == at::kFloat &&
         launch::kernel_dtype(k.operand).has_value() && k.r <= kMaxHeadsPerGroup;
}

bool chunk_scan_switched_on() { return switched_on_unless_zero("TRIAX_MAMBA2_CHUNK_SCAN"); }

// v3 by default (+6.4% on the 780m step, one H100); "v2" asks for the WMMA kernels, "v3-forward" for
// the forward's v3 beside the backward's v2 kernels, "v3-columns" for the forward's and the columns
// kernel's v3 beside the scores kernel's v2.
bool chunk_scan_v3_switched_on() { return !environment_is(kChunkScanKernel, "v2"); }

bool chunk_scan_columns_v3_switched_on() {
  return chunk_scan_v3_switched_on() && !environment_is(kChunkScanKernel, "v3-forward");
}

bool chunk_scan_scores_v3_switched_on() {
  return chunk_scan_columns_v3_switched_on() && !environment_is(kChunkScanKernel, "v3-columns");
}

bool y_in_operand_type_switched_on() { return switched_on_unless_zero("TRIAX_MAMBA2_Y_IN_OPERAND_TYPE"); }

bool chunk_scan_applies(const Chunks& k) {
  return chunk_scan_switched_on() && ssd_kernels_apply(k) && (k.operand == at::kBFloat16 || k.operand == at::kHalf) &&
         kernels::chunk_scan_supports(chunk_scan_shape_of(k));
}

at::Tensor chunk_scan_cuda(const Chunks& k, const at::Tensor& entering) {
  if (!chunk_scan_applies(k))
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "chunk_scan_cuda: shape, dtype or device the fused chunk scan does "
                                              "not take (check chunk_scan_applies first)");
  c10::cuda::CUDAGuard device(k.dt.device());
  const at::Tensor C = contiguous_aligned(k.C), xdt = contiguous_aligned(k.xdt), s = contiguous_aligned(scores(k));
  const at::Tensor decay = contiguous_aligned(k.decay), e = contiguous_aligned(entering.to(at::kFloat));
  const c10::ScalarType y_type = y_in_operand_type_switched_on() ? k.operand : at::kFloat;
  at::Tensor y = at::empty({k.b, k.l, k.g * k.r, k.p}, k.dt.options().dtype(y_type));
  const bool v3 = chunk_scan_v3_switched_on();
  launch::check((v3 ? kernels::chunk_scan_v3 : kernels::chunk_scan)(
                    *launch::kernel_dtype(k.operand), C.const_data_ptr(), xdt.const_data_ptr(),
                    s.const_data_ptr<float>(), decay.const_data_ptr<float>(), e.const_data_ptr<float>(),
                    *launch::kernel_dtype(y_type), y.data_ptr(), chunk_scan_shape_of(k), launch::stream_of(xdt)),
                v3 ? "chunk_scan_v3" : "chunk_scan");
  return y;
}

bool chunk_scan_backward_applies(const Chunks& k) {
  return chunk_scan_applies(k) && switched_on_unless_zero("TRIAX_MAMBA2_CHUNK_SCAN_BACKWARD");
}

ChunkScanGradients chunk_scan_backward_cuda(const Chunks& k, const at::Tensor& dy) {
  if (!chunk_scan_applies(k))
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "chunk_scan_backward_cuda: shape, dtype or device the fused chunk "
                                              "scan does not take (check chunk_scan_applies first)");
  c10::cuda::CUDAGuard device(k.dt.device());
  // dy comes position-major as a view: cast and laid out contiguous in one pass; in the operand
  // type already (y was) neither, where the view is contiguous (one group, chunks dividing the length).
  const at::Tensor xdt = contiguous_aligned(k.xdt);
  const at::Tensor d_y = contiguous_aligned(dy.to(k.operand, false, false, at::MemoryFormat::Contiguous));
  const at::Tensor s = contiguous_aligned(scores(k)), decay = contiguous_aligned(k.decay);
  const at::TensorOptions f32 = k.dt.options().dtype(at::kFloat);
  const int64_t tiles = k.q / kernels::kChunkScanRows;
  at::Tensor d_xdt = at::empty({k.b, k.c, k.g, k.q, k.r, k.p}, f32);
  at::Tensor d_scores = at::empty({k.b, k.c, k.g, k.q, k.q}, f32.dtype(k.operand));
  at::Tensor rows = at::zeros({k.b, k.c, k.g, k.r, k.q, tiles}, f32);
  at::Tensor columns = at::empty({k.b, k.c, k.g, k.r, k.q}, f32);
  const triax::kernels::Dtype operand = *launch::kernel_dtype(k.operand);
  const kernels::ChunkScanShape shape = chunk_scan_shape_of(k);
  const cudaStream_t stream = launch::stream_of(d_y);
  const bool columns_v3 = chunk_scan_columns_v3_switched_on();
  launch::check(
      (columns_v3 ? kernels::chunk_scan_columns_v3 : kernels::chunk_scan_columns)(
          operand, xdt.const_data_ptr(), d_y.const_data_ptr(), s.const_data_ptr<float>(), decay.const_data_ptr<float>(),
          d_xdt.data_ptr<float>(), rows.data_ptr<float>(), columns.data_ptr<float>(), shape, stream),
      columns_v3 ? "chunk_scan_columns_v3" : "chunk_scan_columns");
  const bool scores_v3 = chunk_scan_scores_v3_switched_on();
  launch::check((scores_v3 ? kernels::chunk_scan_scores_v3 : kernels::chunk_scan_scores)(
                    operand, xdt.const_data_ptr(), d_y.const_data_ptr(), decay.const_data_ptr<float>(),
                    d_scores.data_ptr(), shape, stream),
                scores_v3 ? "chunk_scan_scores_v3" : "chunk_scan_scores");
  return {d_xdt, rows.sum(-1) - columns, d_scores};
}

at::Tensor masked_scores_cuda(const Chunks& k, const at::Tensor& scores) {
  c10::cuda::CUDAGuard device(k.dt.device());
  const at::Tensor decay = k.decay.contiguous(), s = scores.contiguous();
  at::Tensor out = at::empty({k.b, k.c, k.g, k.r, k.q, k.q}, k.dt.options().dtype(k.operand));
  launch::check(kernels::masked_scores(*launch::kernel_dtype(k.operand), decay.const_data_ptr<float>(),
                                       s.const_data_ptr<float>(), out.data_ptr(), shape_of(k), launch::stream_of(s)),
                "masked_scores");
  return out;
}

MaskedScoresGradients masked_scores_backward_cuda(const Chunks& k, const at::Tensor& d_masked,
                                                  const at::Tensor& scores) {
  c10::cuda::CUDAGuard device(k.dt.device());
  const at::Tensor decay = k.decay.contiguous(), s = scores.contiguous(), dm = d_masked.contiguous();
  const int64_t tiles = (k.q + kernels::kScoreTile - 1) / kernels::kScoreTile;
  const at::TensorOptions f32 = k.dt.options().dtype(at::kFloat);
  at::Tensor dscores = at::empty({k.b, k.c, k.g, k.q, k.q}, f32.dtype(k.operand));
  at::Tensor rows = at::zeros({k.b, k.c, k.g, k.r, k.q, tiles}, f32);
  at::Tensor columns = at::empty({k.b, k.c, k.g, k.r, k.q}, f32);
  launch::check(kernels::masked_scores_backward(*launch::kernel_dtype(k.operand), dm.const_data_ptr<float>(),
                                                decay.const_data_ptr<float>(), s.const_data_ptr<float>(),
                                                dscores.data_ptr(), rows.data_ptr<float>(), columns.data_ptr<float>(),
                                                shape_of(k), launch::stream_of(s)),
                "masked_scores_backward");
  return {dscores, rows.sum(-1) - columns};
}

bool states_in_operand_type_switched_on() { return switched_on_unless_zero("TRIAX_MAMBA2_STATES_IN_OPERAND_TYPE"); }

namespace {

// The type the state passing's kernels store the backward's operands in: the products' operand
// type where states_in_operand_type_switched_on and it is not fp32, else fp32 (then cast by the
// caller).
c10::ScalarType passed_states_type(const Chunks& k) {
  return k.operand != at::kFloat && states_in_operand_type_switched_on() ? k.operand : at::kFloat;
}

}  // namespace

PassedStates pass_states_cuda(const Chunks& k, const at::Tensor& initial_state, const at::Tensor& states,
                              bool with_operand_copy) {
  c10::cuda::CUDAGuard device(k.dt.device());
  const at::Tensor s = states.contiguous(), decays = chunk_decays(k), initial = fp32_operand(initial_state);
  at::Tensor entering = at::empty({k.b, k.c, k.g, k.r * k.p, k.n}, s.options());
  at::Tensor final_state = at::empty({k.b, k.g * k.r, k.p, k.n}, s.options());
  const c10::ScalarType copy_type = with_operand_copy ? passed_states_type(k) : at::kFloat;
  at::Tensor entering_operand;
  if (copy_type != at::kFloat) entering_operand = at::empty(entering.sizes(), s.options().dtype(copy_type));
  launch::check(
      kernels::pass_states(s.const_data_ptr<float>(), decays.const_data_ptr<float>(), fp32_or_null(initial),
                           entering.data_ptr<float>(), final_state.data_ptr<float>(), *launch::kernel_dtype(copy_type),
                           entering_operand.defined() ? entering_operand.data_ptr() : nullptr, passing_shape_of(k),
                           launch::stream_of(s)),
      "pass_states");
  return {entering, final_state, entering_operand};
}

PassingGradients pass_states_backward_cuda(const Chunks& k, const at::Tensor& entering, const at::Tensor& d_entering,
                                           const at::Tensor& d_final) {
  c10::cuda::CUDAGuard device(k.dt.device());
  const at::Tensor e = entering.contiguous(), de = d_entering.to(at::kFloat).contiguous();
  const at::Tensor decays = chunk_decays(k), df = fp32_operand(d_final);
  const int64_t slices = (k.p * k.n + kernels::kPassingSlice - 1) / kernels::kPassingSlice;
  const c10::ScalarType d_states_type = passed_states_type(k);
  at::Tensor d_states = at::empty({k.b, k.c, k.g, k.r * k.p, k.n}, e.options().dtype(d_states_type));
  at::Tensor d_initial = at::empty({k.b, k.g * k.r, k.p, k.n}, e.options());
  at::Tensor partials = at::empty({k.b, k.c, k.g, k.r, slices}, e.options());
  launch::check(kernels::pass_states_backward(
                    e.const_data_ptr<float>(), decays.const_data_ptr<float>(), de.const_data_ptr<float>(),
                    fp32_or_null(df), *launch::kernel_dtype(d_states_type), d_states.data_ptr(),
                    d_initial.data_ptr<float>(), partials.data_ptr<float>(), passing_shape_of(k), launch::stream_of(e)),
                "pass_states_backward");
  return {d_states, d_initial, partials.sum(-1)};
}

bool scaled_rows_kernel_applies(const at::Tensor& in, const at::Tensor& scale) {
  if (!switched_on_unless_zero("TRIAX_MAMBA2_SCALED_ROWS_KERNEL") || !fused_kernels_enabled() || !in.is_cuda() ||
      !launch::kernel_dtype(in.scalar_type()) || scale.scalar_type() != at::kFloat || scale.device() != in.device() ||
      in.dim() != kernels::kScaledRowsDims + 1 || scale.dim() != in.dim() || scale.size(-1) != 1 ||
      in.stride(-1) != 1 || in.size(-1) % kernels::kScaledRowsVector != 0 || in.numel() == 0 ||
      in.numel() / kernels::kScaledRowsVector > INT32_MAX)
    return false;
  for (int64_t d = 0; d < kernels::kScaledRowsDims; ++d)
    if (scale.size(d) != in.size(d) || in.stride(d) % kernels::kScaledRowsVector != 0) return false;
  return reinterpret_cast<std::uintptr_t>(in.const_data_ptr()) % 16 == 0;
}

void scaled_rows_cuda(const at::Tensor& out, const at::Tensor& in, const at::Tensor& scale) {
  if (out.sizes() != in.sizes() || out.scalar_type() != in.scalar_type() || out.stride(-1) != 1)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "scaled_rows_cuda: out must have in's sizes and type, unit row stride");
  c10::cuda::CUDAGuard device(in.device());
  launch::check(kernels::scaled_rows(*launch::kernel_dtype(in.scalar_type()), in.const_data_ptr(), row_strides(in),
                                     scale.const_data_ptr<float>(), row_strides(scale), out.data_ptr(),
                                     row_strides(out), rows_shape(in), launch::stream_of(in)),
                "scaled_rows");
}

bool summed_rows_kernel_applies(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b) {
  if (!switched_on_unless_zero("TRIAX_MAMBA2_SUMMED_ROWS_KERNEL") || !fused_kernels_enabled() || !out.is_cuda() ||
      !launch::kernel_dtype(out.scalar_type()) || out.dim() > kernels::kScaledRowsDims + 1 || out.numel() == 0)
    return false;
  for (const at::Tensor* t : {&a, &b})
    if (t->device() != out.device() || t->scalar_type() != out.scalar_type() || t->sizes() != out.sizes()) return false;
  const at::Tensor o = as_rows(out), x = as_rows(a), y = as_rows(b);
  if (o.stride(-1) != 1 || x.stride(-1) != 1 || y.stride(-1) != 1) return false;
  return kernels::summed_rows_takes(x.const_data_ptr(), row_strides(x), y.const_data_ptr(), row_strides(y),
                                    o.const_data_ptr(), row_strides(o), rows_shape(o));
}

void summed_rows_cuda(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b) {
  if (!summed_rows_kernel_applies(out, a, b))
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "summed_rows_cuda: tensors the kernel does not take (check "
                "summed_rows_kernel_applies first)");
  c10::cuda::CUDAGuard device(out.device());
  const at::Tensor o = as_rows(out), x = as_rows(a), y = as_rows(b);
  launch::check(kernels::summed_rows(*launch::kernel_dtype(out.scalar_type()), x.const_data_ptr(), row_strides(x),
                                     y.const_data_ptr(), row_strides(y), o.data_ptr(), row_strides(o), rows_shape(o),
                                     launch::stream_of(o)),
                "summed_rows");
}

}  // namespace triax::mamba2::ssd
