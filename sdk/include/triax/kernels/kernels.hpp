// Launchers of the SDK's CUDA kernels (sdk/src/kernels/*.cu), called by the autograd functions of
// fused_ops.cpp, rotary_qkv.cpp and fused_linear_cross_entropy.cpp, and the kernels' Dtype, which
// plugins' own kernels share. Plain pointers and sizes: the .cu files include no LibTorch header,
// so nvcc stays fast and independent of LibTorch's headers.
//
// Every launcher runs on `stream` of the current device, expects contiguous row-major tensors
// (unless strides are given), computes in fp32 and returns the launch's error (cudaSuccess when
// there was nothing to do). Compiled only with -DTRIAX_CUDA=ON.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace triax::kernels {

// The element types of activations and weights the kernels read and write.
enum class Dtype { Float32, BFloat16, Float16 };

// ---- fp8 (fp8_cast.cu) -----------------------------------------------------------------------

// out[r, c] = out_t[c, r] = fp8(x[r, c] * multiplier[r * multiplier_row_stride + c *
// multiplier_col_stride]), e4m3 or (e5m2) e5m2, rounded to nearest even, saturating. x: [rows,
// cols] row-major; out: [rows, cols] bytes, out_t: [cols, rows] bytes, either (not both) null;
// the multiplier fp32 on the device (strides 0, 0: one for the whole tensor).
cudaError_t scale_to_fp8(Dtype dtype, const void* x, const float* multiplier, int64_t multiplier_row_stride,
                         int64_t multiplier_col_stride, bool e5m2, void* out, void* out_t, int64_t rows, int64_t cols,
                         cudaStream_t stream);

// The tensorwise scale of x (fp8_amax.cu), in one launch: out[0] = the scale max(amax,
// amax_floor) / largest, out[1] = the multiplier largest / max(amax, amax_floor), out[2] = amax =
// max |x| over `count` elements (NaN if any is), in the fp32 arithmetic of LibTorch's CUDA ops.
// The scale comes first so that it can start an allocation: cuBLASLt reads a scale only from a
// 16-byte aligned address. workspace: kFp8ScaleBlocks + 1 floats on the device (block maxima and
// a ticket counter).
constexpr int64_t kFp8ScaleBlocks = 1024;
cudaError_t fp8_tensor_scale(Dtype dtype, const void* x, int64_t count, float largest, float amax_floor,
                             float* workspace, float* out, cudaStream_t stream);

// The amax of a producer's output, folded in as the producer writes it (docs/fp8.md): kAmaxSlots
// fp32 on the device, zero before the launch, whose max is max |output| (NaN if any element is).
// A launcher's `amax_slots` may be null: then no amax is computed (the kernel compiled without it).
constexpr int kAmaxSlots = 32;

// The tensorwise scale from amax slots that a producer filled: out as fp8_tensor_scale's (scale,
// multiplier, amax), with its arithmetic. One warp.
cudaError_t fp8_scale_from_amax_slots(const float* amax_slots, float largest, float amax_floor, float* out,
                                      cudaStream_t stream);

// ---- fp8 casts of grouped products' operands (fp8_grouped_cast.cu) ----------------------------

// The rows of a [rows, cols] row-major matrix: `first`'s, or, with `second`, groups of first_rows
// rows of `first` each followed by second_rows rows of `second` (the MoE experts' gate [E, n1, K]
// and up [E, n2, K] read as one [E * (n1 + n2), K] without concatenating them).
struct StackedRows {
  const void* first = nullptr;
  int64_t first_rows = 0;
  const void* second = nullptr;
  int64_t second_rows = 0;
};

// Rowwise e4m3 in one launch, a block per row read once: scale[r] and the multiplier from max
// |x[r, :]| in fp8_tensor_scale's arithmetic, out[r, :] = fp8(x[r, :] * multiplier), as
// fp8::quantise per row computes them. cols % 8 == 0 and every pointer 16-byte aligned, else
// cudaErrorInvalidValue.
cudaError_t fp8_rowwise_cast(Dtype dtype, StackedRows x, int64_t rows, int64_t cols, float largest, float amax_floor,
                             void* out, float* scale, cudaStream_t stream);

// Groups of a matrix's rows, each a whole number of 16-row blocks: group_of_block (int64, on the
// device) the group of each block, or, where it is null, `count` groups of rows_per_group rows.
struct RowGroupsOnDevice {
  const int64_t* group_of_block = nullptr;
  int64_t rows_per_group = 0;
  int64_t count = 0;
};

// e4m3 per column of each row group, transposed: scale[g * cols + c] and its multiplier from
// max |x[r, c]| over group g's rows (fp8_tensor_scale's arithmetic); out_t = fp8(x[r, c] x the
// multiplier of r's group at c), transposed to [cols, rows], or, with per_group_transpose (uniform
// groups only), each group's rows transposed on their own: [groups, cols, rows_per_group]. Three
// launches (the amax by atomics, the scales, the cast through shared-memory tiles). rows % 16 ==
// 0, cols % 8 == 0, every pointer 16-byte aligned, else cudaErrorInvalidValue. workspace:
// groups x cols floats on the device.
cudaError_t fp8_group_column_cast(Dtype dtype, StackedRows x, int64_t rows, int64_t cols, RowGroupsOnDevice groups,
                                  bool per_group_transpose, float largest, float amax_floor, float* workspace,
                                  void* out_t, float* scale, cudaStream_t stream);

// ---- RMSNorm (rms_norm.cu) -------------------------------------------------------------------

// The most threads of rms_norm_forward's block per row (row_threads(hidden / vector, this)): the
// order of its sum of squares, which norm_gemv replays.
constexpr int kRmsNormMaxThreads = 512;

// y[r, :] = round(round(x[r, :] * rstd[r]) * weight), rstd[r] = 1 / sqrt(mean(x[r, :]^2) + eps):
// the normalised row is rounded to the input dtype before the weight multiplies it, as in
// Hugging Face's LlamaRMSNorm. x, y: [rows, hidden]; weight: [hidden]; rstd: [rows] fp32 (saved
// for backward). With `residual` (and `sum`, both [rows, hidden], or both null): the row
// normalised is sum = round(x + residual), which is written too (a residual add before the norm).
// amax_slots: null, or where max |y| is folded (kAmaxSlots).
cudaError_t rms_norm_forward(Dtype dtype, const void* x, const void* residual, const void* weight, void* y, void* sum,
                             float* rstd, float* amax_slots, int64_t rows, int64_t hidden, float eps,
                             cudaStream_t stream);

// The residual add in front of the norm with the residual stream in fp32 (a model's
// residual_in_fp32; inference, no backward): sum = x + residual in fp32, then the norm of sum
// rounded to dtype, as rms_norm_forward computes it. x, y: [rows, hidden] of dtype; residual,
// sum: [rows, hidden] fp32. One instance of rms_norm_forward's kernel.
cudaError_t add_rms_norm_forward_fp32_sum(Dtype dtype, const void* x, const float* residual, const void* weight,
                                          void* y, float* sum, float* rstd, int64_t rows, int64_t hidden, float eps,
                                          cudaStream_t stream);

// rms_norm_forward of x kept in fp32 (a residual stream, Mamba's residual_in_fp32, in training):
// each element rounded to dtype as it is read, written so to x_rounded (what the backward reads:
// half the bytes of x saved) and normalised as rms_norm_forward does: y has the bits of
// rms_norm_forward on x cast to dtype, without the cast's own pass. x: [rows, hidden] fp32;
// x_rounded, y: [rows, hidden] of dtype (for Float32, x_rounded may be x itself: nothing to write);
// weight: [hidden] of dtype; rstd: [rows].
cudaError_t rms_norm_forward_fp32_input(Dtype dtype, const float* x, const void* weight, void* y, void* x_rounded,
                                        float* rstd, int64_t rows, int64_t hidden, float eps, cudaStream_t stream);

// How many fp32 rows of weight-gradient partial sums rms_norm_backward needs as scratch for
// `rows` rows (one per thread block of its first kernel).
int64_t rms_norm_weight_partials(int64_t rows);

// grad_x = rstd * (g - n * mean(g * n)) with g = grad_y * weight, n = x * rstd;
// grad_weight = sum over the rows of grad_y * round(n), summed in fp32 in a fixed order (per
// block into weight_partials[b, :], then the partial rows by a second kernel) and rounded once.
// grad_y, x, grad_x: [rows, hidden]; weight, grad_weight: [hidden]; rstd: [rows];
// weight_partials: [rms_norm_weight_partials(rows), hidden] fp32 scratch. `grad_sum`
// ([rows, hidden], or null): a gradient that reaches x directly, added to grad_x before it is rounded.
// amax_slots: null, or where max |grad_x| is folded (kAmaxSlots).
cudaError_t rms_norm_backward(Dtype dtype, const void* grad_y, const void* x, const void* weight, const float* rstd,
                              const void* grad_sum, void* grad_x, float* weight_partials, void* grad_weight,
                              float* amax_slots, int64_t rows, int64_t hidden, cudaStream_t stream);

// rms_norm_backward for rms_norm_forward_fp32_input (x: its x_rounded, of dtype), grad_x written
// in fp32: the norm's part rounded to dtype first (the bits of rms_norm_backward's grad_x cast to
// fp32), then plus `grad_sum` (fp32 [rows, hidden], or null: a gradient that reaches x directly,
// the residual stream's) in fp32: the cast of the gradient and the sum of x's two gradients in
// this one pass. grad_y, weight, grad_weight of dtype; no amax.
cudaError_t rms_norm_backward_fp32_input(Dtype dtype, const void* grad_y, const void* x, const void* weight,
                                         const float* rstd, const float* grad_sum, float* grad_x,
                                         float* weight_partials, void* grad_weight, int64_t rows, int64_t hidden,
                                         cudaStream_t stream);

// ---- the fp32 residual add (residual_add.cu) ------------------------------------------------

// out = residual + y over `count` elements in fp32 (y of dtype widened exactly: LibTorch's
// mixed-dtype add's bits), by 16-byte vectors where the three pointers are 16-byte aligned.
// residual, out: fp32, out not overlapping either input.
cudaError_t add_to_fp32_residual(Dtype dtype, const float* residual, const void* y, float* out, int64_t count,
                                 cudaStream_t stream);

// ---- SwiGLU (swiglu.cu) ----------------------------------------------------------------------

// y[r, c] = silu(gate[r, c]) * up[r, c] over rows x cols. Row r of gate and up starts r x
// in_stride elements in, row r of y r x out_stride: gate and up may be the halves of one fused
// GEMM's [rows, 2 x cols] output (up = gate + cols, in_stride = 2 x cols); contiguous operands are
// one row (rows = 1, cols = every element).
// amax_slots: null, or where max |y| is folded (kAmaxSlots).
cudaError_t swiglu_forward(Dtype dtype, const void* gate, const void* up, int64_t in_stride, void* y,
                           int64_t out_stride, float* amax_slots, int64_t rows, int64_t cols, cudaStream_t stream);

// grad_gate = grad_y * up * silu'(gate), grad_up = grad_y * silu(gate); grad_y laid out as y, the
// two gradients as gate and up (into one [rows, 2 x cols] gradient for fused halves). y: null, or
// where the forward's output is written again (laid out as grad_y), from the same reads.
// amax_slots: null, or where the max of |grad_gate| and |grad_up| is folded (kAmaxSlots).
cudaError_t swiglu_backward(Dtype dtype, const void* grad_y, int64_t out_stride, const void* gate, const void* up,
                            void* grad_gate, void* grad_up, void* y, int64_t in_stride, float* amax_slots,
                            int64_t rows, int64_t cols, cudaStream_t stream);

// ---- rotary embedding (rotary.cu) ------------------------------------------------------------

// The shape [batch, heads, seq, head_dim] of a rotary operand and the strides (in elements) of
// its first three dims; the last dim is contiguous. With group > 1 the heads are blocks of
// `group` members (grouped-query attention's query heads inside the fused q/k/v projection):
// head h sits at (h / group) x stride[1] + (h % group) x member_stride of its side.
struct RotaryLayout {
  int64_t batch, heads, seq, head_dim;
  int64_t in_stride[3];
  int64_t out_stride[3];
  int64_t group = 1;
  int64_t in_member_stride = 0, out_member_stride = 0;
  // Decoding with a cache, positions read on the device ([batch x seq] int64, row-major), so that
  // a CUDA graph replays with new positions and no table row is gathered first. table_rows: each
  // vector's row of cos and sin, clamped to table_length - 1 (the tables are then the whole
  // [table_length, head_dim] ones); out_rows: the output position of each vector in place of s
  // (new keys and values written straight into a cache). Null: position s, as above.
  const int64_t* table_rows = nullptr;
  int64_t table_length = 0;
  const int64_t* out_rows = nullptr;
  // null, or where max |out| is folded (kAmaxSlots): the backward's and the copy's only (the
  // gradient of the q/k/v projection's output, for its fp8 product).
  float* amax_slots = nullptr;
};

// Forward (inverse = false), with h = head_dim / 2 and i < h:
//   out[i]     = x[i] cos[i] - x[i+h] sin[i]
//   out[i + h] = x[i+h] cos[i+h] + x[i] sin[i+h]
// Backward (inverse = true, x = the output's gradient): the transpose of that map,
//   out[i]     = x[i] cos[i] + x[i+h] sin[i+h]
//   out[i + h] = x[i+h] cos[i+h] - x[i] sin[i]
// cos, sin: [seq, head_dim] contiguous, in x's dtype.
cudaError_t rotary(Dtype dtype, const void* x, const void* cos, const void* sin, void* out, const RotaryLayout& layout,
                   bool inverse, cudaStream_t stream);
// The same walk over the same layouts copying x to out (no tables): the value heads of the fused
// q/k/v projection into attention's layout and their gradient back, in 16-byte vectors where the
// strides allow (the strided at::copy_ it replaces took 5.3 ms a step at 1.7b, both ways).
cudaError_t copy_heads(Dtype dtype, const void* x, void* out, const RotaryLayout& layout, cudaStream_t stream);
// Up to kRotaryMaxWalks walks of rotary(inverse = false) (copy false) or copy_heads() (copy true)
// over the same tables in one launch, their vectors end to end over one grid: the fused q/k/v
// projection's q, k and v, where at a decoding step each walk is a launch and almost no work. The
// same bits as the walks launched one by one; no amax slots.
struct RotaryWalk {
  const void* x;
  void* out;
  RotaryLayout layout;
  bool copy;
};
constexpr int kRotaryMaxWalks = 3;
cudaError_t rotary_walks(Dtype dtype, const RotaryWalk* walks, int count, const void* cos, const void* sin,
                         cudaStream_t stream);

// ---- a few rows times a matrix (gemv.cu) -----------------------------------------------------

constexpr int64_t kGemvMaxRows = 4;

// Whether gemv() takes these operands: 1 to kGemvMaxRows rows, whole 16-byte vectors along
// in_features, x, w and y 16-byte aligned.
bool gemv_applies(int64_t rows, int64_t in_features, int element_size, const void* x, const void* w, const void* y);
// y[r, n] = sum_k x[r, k] w[n, k] in fp32, rounded once: x [rows, in_features], w
// [out_features, in_features], y [rows, out_features], all contiguous.
cudaError_t gemv(Dtype dtype, const void* x, const void* w, void* y, int64_t rows, int64_t out_features,
                 int64_t in_features, cudaStream_t stream);
// gemv() with each row of at least kGemvSplitMinFeatures (and a multiple of 4 vectors) split over
// the 4 warps of a block, their sums added in shared memory: the same product in another order of
// summation (not gemv()'s bits there); shorter rows go to gemv(). The same operands as gemv().
constexpr int64_t kGemvSplitMinFeatures = 4096;
cudaError_t gemv_long_rows(Dtype dtype, const void* x, const void* w, void* y, int64_t rows, int64_t out_features,
                           int64_t in_features, cudaStream_t stream);
// y[r, n] = swiglu(g, u) with g = sum_k x[r, k] w[n, k] and u = sum_k x[r, k] w[out_features + n, k],
// each rounded to the dtype first (a fused gate/up product's output through SwiGLU, with the bits
// of gemv() then swiglu_halves()): w [2 x out_features, in_features], y [rows, out_features].
// gemv_applies() tells whether it takes the operands.
cudaError_t gemv_swiglu(Dtype dtype, const void* x, const void* w, void* y, int64_t rows, int64_t out_features,
                        int64_t in_features, cudaStream_t stream);

// The operands of gemv_by_expert: row r of x [rows, in_features] times the matrix of expert
// experts[r] (int64, on the device) of w [expert_count, out_features, in_features], into y [rows,
// out_features]; w_up: the up stack of gemv_swiglu_by_expert (w the gate stack), else null. An
// expert index out of [0, expert_count) gives a row of zeros.
struct GemvByExpertOperands {
  const void* x;
  const void* w;
  const void* w_up;
  const int64_t* experts;
  void* y;
  int64_t rows, out_features, in_features, expert_count;
};

// Whether gemv_by_expert takes these operands: 1 to 65535 rows, whole 16-byte vectors along
// in_features, x, w, w_up and y 16-byte aligned.
bool gemv_by_expert_applies(const GemvByExpertOperands& operands, int element_size);
// y[r] = x[r] w[experts[r]]^T, each warp summing as gemv() does.
cudaError_t gemv_by_expert(Dtype dtype, const GemvByExpertOperands& operands, cudaStream_t stream);
// y[r] = silu(x[r] w[e]^T) * (x[r] w_up[e]^T) for e = experts[r], both products rounded as stored.
cudaError_t gemv_swiglu_by_expert(Dtype dtype, const GemvByExpertOperands& operands, cudaStream_t stream);

// ---- an RMSNorm then a few rows times a matrix, one launch (norm_gemv.cu) ------------------

// The operands of norm_gemv: y = rms_norm(x + pending, norm_weight, eps) w^T for x, pending, sum
// [rows, in_features], w [out_features (x 2 with SwiGLU), in_features], y [rows, out_features].
// pending null: the row normalised is x itself (no sum written); norm_weight null (and pending
// null): no norm, y = x w^T as gemv(). programmatic_launch: launched with programmatic stream
// serialization, so that it may start while the stream's previous kernel ends (it waits for that
// kernel before reading x); under stream capture too.
struct NormGemvOperands {
  const void* x;
  const void* pending;  // or null
  void* sum;            // round(x + pending), with pending
  const void* norm_weight;  // or null
  float eps;
  const void* w;
  void* y;
  int64_t rows, out_features, in_features;
  bool programmatic_launch = false;
};

// The most bytes of normalised rows (rows x in_features elements) a block stages in shared memory.
constexpr int64_t kNormGemvMaxStagedBytes = 64 * 1024;

// Whether norm_gemv takes these operands: gemv_applies(), and with a norm the staged rows within
// kNormGemvMaxStagedBytes, every pointer 16-byte aligned.
bool norm_gemv_applies(const NormGemvOperands& operands, int element_size);
// The bits of rms_norm_forward (its add with pending) then gemv(): sum written once, y.
cudaError_t norm_gemv(Dtype dtype, const NormGemvOperands& operands, cudaStream_t stream);
// The bits of rms_norm_forward then gemv_swiglu(): w [2 x out_features, in_features].
cudaError_t norm_gemv_swiglu(Dtype dtype, const NormGemvOperands& operands, cudaStream_t stream);

// ---- cross-entropy over a chunk of logits (cross_entropy.cu) ---------------------------------

// Per row r of logits [rows, cols] (row stride `stride` elements): row_max[r] = max_c z[r, c],
// sum_exp[r] = sum_c exp(z[r, c] - row_max[r]), label_logit[r] = z[r, label[r]] or 0 where
// label[r] < 0 (the label is not among these columns). Outputs fp32 [rows]. cols >= 1.
cudaError_t cross_entropy_stats(Dtype dtype, const void* logits, int64_t rows, int64_t cols, int64_t stride,
                                const int64_t* label, float* row_max, float* sum_exp, float* label_logit,
                                cudaStream_t stream);

// In place: z[r, c] <- (exp(z[r, c] - row_max[r]) / sum_exp[r] - [c == label[r]]) * scale[r], the
// cross-entropy gradient of the logits given the row's global max and sum of exponentials.
cudaError_t cross_entropy_gradient(Dtype dtype, void* logits, int64_t rows, int64_t cols, int64_t stride,
                                   const int64_t* label, const float* row_max, const float* sum_exp, const float* scale,
                                   cudaStream_t stream);

}  // namespace triax::kernels
