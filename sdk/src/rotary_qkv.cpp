#include "triax/layers/rotary_qkv.hpp"

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <string>
#include <vector>

#include "triax/error.hpp"
#include "triax/layers/fused_ops.hpp"
#include "triax/tensor_text.hpp"

#ifdef TRIAX_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/autograd/custom_function.h>

#include "recorded_amax.hpp"
#include "triax/environment_switch.hpp"
#include "triax/kernels/cuda_launch.hpp"
#endif

namespace triax {
namespace {

// {q, k, v} of qkv, unrotated, in [batch, heads, seq, head_dim]; v a copy.
std::array<at::Tensor, 3> split_heads(const at::Tensor& qkv) {
  const int64_t batch = qkv.size(0), seq = qkv.size(1), kv_heads = qkv.size(2), group = qkv.size(3) - 2;
  // split_with_sizes: its backward joins the three gradients in one tensor.
  const std::vector<at::Tensor> parts = qkv.split_with_sizes({group, 1, 1}, 3);
  // The query heads of all groups side by side: a view when one group or one head per group, a
  // copy otherwise.
  const at::Tensor q = parts[0].reshape({batch, seq, kv_heads * group, qkv.size(4)}).transpose(1, 2);
  return {q, parts[1].squeeze(3).transpose(1, 2), parts[2].squeeze(3).transpose(1, 2).contiguous()};
}

std::array<at::Tensor, 3> rotary_qkv_composition(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin) {
  const auto [q, k, v] = split_heads(qkv);
  return {apply_rotary(q, cos, sin), apply_rotary(k, cos, sin), v};
}

#ifdef TRIAX_WITH_CUDA
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
namespace launch = cuda_launch;

// One side of a rotary launch: where its heads start and the strides (in elements) of batch,
// head block, position and member of a block.
struct Side {
  void* data;
  int64_t batch, block, seq, member;
};

// A [batch, heads, seq, head_dim] operand (attention's side, any strides) with its heads taken
// `group` at a time, as the other side's blocks are.
Side side_of(const at::Tensor& t, int64_t group) {
  return {t.mutable_data_ptr(), t.stride(0), group * t.stride(1), t.stride(2), t.stride(1)};
}

// The heads of qkv's dim-3 slots [first, first + group) (query heads) or [first, first + 1).
Side slot_of(const at::Tensor& qkv, int64_t first) {
  char* base = static_cast<char*>(qkv.mutable_data_ptr()) + first * qkv.stride(3) * qkv.element_size();
  return {base, qkv.stride(0), qkv.stride(2), qkv.stride(1), qkv.stride(3)};
}

enum class Walk { Rotate, Unrotate, Copy };  // forward, its transpose (backward), the value heads

// Positions read on the device (kernels::RotaryLayout): the tables' row of each vector and where
// it is written. Unset: position s of the operand, tables of its length.
struct DevicePositions {
  const int64_t* table_rows = nullptr;
  const int64_t* out_rows = nullptr;
};

// The layout of one walk over `like` (qkv or its gradient, [batch, seq, ...]). amax_slots: null,
// or where max |out| is folded (Unrotate and Copy only).
kernels::RotaryLayout layout_of(const Side& in, const Side& out, int64_t heads, int64_t group, const at::Tensor& like,
                                const at::Tensor& cos, const DevicePositions& at, float* amax_slots = nullptr) {
  kernels::RotaryLayout layout{
      like.size(0), heads, like.size(1), cos.size(1), {in.batch, in.block, in.seq}, {out.batch, out.block, out.seq}};
  layout.group = group;
  layout.in_member_stride = in.member;
  layout.out_member_stride = out.member;
  layout.table_rows = at.table_rows;
  layout.table_length = cos.size(0);
  layout.out_rows = at.out_rows;
  layout.amax_slots = amax_slots;
  return layout;
}

void walk(Walk what, const Side& in, const Side& out, int64_t heads, int64_t group, const at::Tensor& like,
          const at::Tensor& cos, const at::Tensor& sin, const DevicePositions& at = {}, float* amax_slots = nullptr) {
  const kernels::RotaryLayout layout = layout_of(in, out, heads, group, like, cos, at, amax_slots);
  const kernels::Dtype dtype = *launch::kernel_dtype(like.scalar_type());
  const cudaStream_t stream = launch::stream_of(like);
  if (what == Walk::Copy) {
    launch::check(kernels::copy_heads(dtype, in.data, out.data, layout, stream), "rotary_qkv value heads");
    return;
  }
  const bool inverse = what == Walk::Unrotate;
  launch::check(
      kernels::rotary(dtype, in.data, cos.const_data_ptr(), sin.const_data_ptr(), out.data, layout, inverse, stream),
      inverse ? "rotary_qkv backward" : "rotary_qkv forward");
}

// Where the forward's q, k and v go, and the positions each is read and written at.
struct ForwardSides {
  Side q, k, v;
  DevicePositions q_at, kv_at;
};

// The forward's walks of qkv (`in`): q and k rotated, v copied; in one launch
// (kernels::rotary_walks) or three. At a decoding step each walk is a launch with almost no work:
// one launch made the 1.7b batch-1 step 3.6% faster (docs/generation-performance.md).
void forward_walks(const at::Tensor& in, const ForwardSides& to, const at::Tensor& cos, const at::Tensor& sin,
                   bool one_launch) {
  const int64_t kv_heads = in.size(2), group = in.size(3) - 2;
  const Side from[] = {slot_of(in, 0), slot_of(in, group), slot_of(in, group + 1)};
  const Side into[] = {to.q, to.k, to.v};
  const int64_t heads[] = {kv_heads * group, kv_heads, kv_heads}, groups[] = {group, 1, 1};
  const DevicePositions at[] = {to.q_at, to.kv_at, to.kv_at};
  constexpr int kValues = 2;  // the walk that copies
  if (!one_launch) {
    for (int w = 0; w < 3; ++w)
      walk(w == kValues ? Walk::Copy : Walk::Rotate, from[w], into[w], heads[w], groups[w], in, cos, sin, at[w]);
    return;
  }
  kernels::RotaryWalk walks[3];
  for (int w = 0; w < 3; ++w)
    walks[w] = {from[w].data, into[w].data, layout_of(from[w], into[w], heads[w], groups[w], in, cos, at[w]),
                w == kValues};
  launch::check(kernels::rotary_walks(*launch::kernel_dtype(in.scalar_type()), walks, 3, cos.const_data_ptr(),
                                      sin.const_data_ptr(), launch::stream_of(in)),
                "rotary_qkv forward (one launch)");
}

at::Tensor head_dim_contiguous(const at::Tensor& t) { return t.stride(-1) == 1 ? t : t.contiguous(); }

struct RotaryQkvFunction : torch::autograd::Function<RotaryQkvFunction> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& qkv, const at::Tensor& cos,
                               const at::Tensor& sin, bool record_gradient_amax) {
    c10::cuda::CUDAGuard device(qkv.device());
    const at::Tensor in = head_dim_contiguous(qkv), c = cos.contiguous(), s = sin.contiguous();
    const int64_t batch = in.size(0), seq = in.size(1), kv_heads = in.size(2), group = in.size(3) - 2;
    const int64_t head_dim = in.size(4);
    // q, k and v in [batch, seq, heads, head_dim] storage, as apply_rotary returns them for views of
    // the projection: attention's output then comes in that layout too, and o_proj takes it
    // without a copy (which its backward would keep: one more activation per layer).
    auto attention_layout = [&](int64_t heads) {
      return at::empty_strided({batch, heads, seq, head_dim}, {seq * heads * head_dim, head_dim, heads * head_dim, 1},
                               in.options());
    };
    at::Tensor q = attention_layout(kv_heads * group), k = attention_layout(kv_heads), v = attention_layout(kv_heads);
    // Three launches: training's walks are large, and the one launch was timed at decoding steps only.
    forward_walks(in, {side_of(q, group), side_of(k, 1), side_of(v, 1)}, c, s, /*one_launch=*/false);
    ctx->save_for_backward({c, s});
    ctx->saved_data["sizes"] = in.sizes().vec();
    ctx->saved_data["record_gradient_amax"] = record_gradient_amax;
    return {q, k, v};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &c = saved[0], &s = saved[1];
    c10::cuda::CUDAGuard device(c.device());
    const std::vector<int64_t> sizes = ctx->saved_data["sizes"].toIntVector();
    const int64_t kv_heads = sizes[2], group = sizes[3] - 2;
    at::Tensor grad = at::empty(sizes, c.options());
    // The three walks fold into the same slots: the amax of the whole gradient (a part zeroed
    // for want of a gradient adds nothing to it).
    const at::Tensor slots = fp8::amax_slots_if(ctx->saved_data["record_gradient_amax"].toBool(), grad);
    float* amax = slots.defined() ? slots.mutable_data_ptr<float>() : nullptr;
    // An output that took no gradient (undefined) contributes zeros.
    if (grads[0].defined()) {
      const at::Tensor gq = head_dim_contiguous(grads[0]);
      walk(Walk::Unrotate, side_of(gq, group), slot_of(grad, 0), kv_heads * group, group, grad, c, s, {}, amax);
    } else {
      grad.narrow(3, 0, group).zero_();
    }
    if (grads[1].defined()) {
      const at::Tensor gk = head_dim_contiguous(grads[1]);
      walk(Walk::Unrotate, side_of(gk, 1), slot_of(grad, group), kv_heads, 1, grad, c, s, {}, amax);
    } else {
      grad.select(3, group).zero_();
    }
    if (grads[2].defined())
      walk(Walk::Copy, side_of(head_dim_contiguous(grads[2]), 1), slot_of(grad, group + 1), kv_heads, 1, grad, c, s, {},
           amax);
    else
      grad.select(3, group + 1).zero_();
    fp8::record_amax_if(grad, slots);
    return {grad, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};
// rotary_qkv_into_cache's kernels: q rotated into attention's layout, k rotated and v copied
// into the cache at their positions; cos and sin rows chosen by the kernel.
at::Tensor rotary_qkv_into_cache_kernels(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin,
                                         const at::Tensor& positions, const at::Tensor& keys,
                                         const at::Tensor& values) {
  c10::cuda::CUDAGuard device(qkv.device());
  const at::Tensor in = head_dim_contiguous(qkv), c = cos.contiguous(), s = sin.contiguous();
  const at::Tensor at = positions.contiguous();
  const int64_t batch = in.size(0), seq = in.size(1), kv_heads = in.size(2), group = in.size(3) - 2;
  const int64_t heads = kv_heads * group, head_dim = in.size(4);
  at::Tensor q = at::empty_strided({batch, heads, seq, head_dim}, {seq * heads * head_dim, head_dim, heads * head_dim, 1},
                                   in.options());
  const DevicePositions rows_only{at.const_data_ptr<int64_t>(), nullptr};
  const DevicePositions into_cache{at.const_data_ptr<int64_t>(), at.const_data_ptr<int64_t>()};
  // TRIAX_ROTARY_ONE_LAUNCH=0 (read at every call) keeps the three launches, to time both.
  forward_walks(in, {side_of(q, group), side_of(keys, 1), side_of(values, 1), rows_only, into_cache}, c, s,
                switched_on_unless_zero("TRIAX_ROTARY_ONE_LAUNCH"));
  return q;
}
#endif  // TRIAX_WITH_CUDA

// The same through rotary_qkv on gathered table rows and scatters into the cache.
at::Tensor rotary_qkv_into_cache_composition(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin,
                                             const at::Tensor& positions, at::Tensor& keys, at::Tensor& values) {
  const int64_t rows = qkv.size(0), fresh = qkv.size(1), kv_heads = qkv.size(2), head_dim = qkv.size(4);
  // The rows' tokens side by side as one sequence, rotated by the tables' rows of their positions.
  const at::Tensor side_by_side = qkv.reshape({1, rows * fresh, kv_heads, qkv.size(3), head_dim});
  const at::Tensor table_rows = positions.reshape({-1}).clamp_max(cos.size(0) - 1);
  const auto [q, k, v] = rotary_qkv(side_by_side, cos.index_select(0, table_rows), sin.index_select(0, table_rows));
  auto by_row = [&](const at::Tensor& t) {  // [1, heads, rows x new, head_dim] -> [rows, heads, new, head_dim]
    return t.transpose(1, 2).reshape({rows, fresh, t.size(1), head_dim}).transpose(1, 2);
  };
  const at::Tensor at = positions.view({rows, 1, fresh, 1}).expand({rows, kv_heads, fresh, head_dim});
  keys.scatter_(2, at, by_row(k));
  values.scatter_(2, at, by_row(v));
  return by_row(q);
}

void check_into_cache(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin,
                      const at::Tensor& positions, const at::Tensor& keys, const at::Tensor& values) {
  auto fail = [&](const std::string& what) {
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "rotary_qkv_into_cache: " + what + " (qkv " + shape_text(qkv.sizes()) + ", cos " +
                    shape_text(cos.sizes()) + ", positions " + shape_text(positions.sizes()) + ", keys " +
                    shape_text(keys.sizes()) + ")");
  };
  if (qkv.dim() != 5 || qkv.size(3) < 3 || qkv.size(4) % 2 != 0)
    fail("qkv must be [rows, new, kv_heads, group + 2, head_dim] with group >= 1 and an even head_dim");
  if (cos.dim() != 2 || cos.sizes() != sin.sizes() || cos.size(0) < 1 || cos.size(1) != qkv.size(4))
    fail("cos and sin must be [positions, head_dim]");
  if (positions.scalar_type() != at::kLong || positions.sizes() != qkv.sizes().slice(0, 2))
    fail("positions must be int64 [rows, new]");
  if (keys.dim() != 4 || keys.sizes() != values.sizes() || keys.size(0) != qkv.size(0) ||
      keys.size(1) != qkv.size(2) || keys.size(3) != qkv.size(4) || !keys.is_contiguous() || !values.is_contiguous() ||
      keys.scalar_type() != qkv.scalar_type() || values.scalar_type() != qkv.scalar_type())
    fail("keys and values must be contiguous [rows, kv_heads, capacity, head_dim] in qkv's dtype");
}

}  // namespace

at::Tensor rotary_qkv_into_cache(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin,
                                 const at::Tensor& positions, at::Tensor& keys, at::Tensor& values) {
  RECORD_FUNCTION("triax::rotary_qkv_into_cache", std::vector<c10::IValue>());  // 1 or 3 launches on CUDA
  check_into_cache(qkv, cos, sin, positions, keys, values);
#ifdef TRIAX_WITH_CUDA
  if (qkv.numel() > 0 && positions.device() == qkv.device() &&
      cuda_launch::kernels_apply({&qkv, &cos, &sin, &keys, &values}))
    return rotary_qkv_into_cache_kernels(qkv, cos, sin, positions, keys, values);
#endif
  return rotary_qkv_into_cache_composition(qkv, cos, sin, positions, keys, values);
}

std::array<at::Tensor, 3> split_qkv(const at::Tensor& qkv) {
  if (qkv.dim() != 5 || qkv.size(3) < 3)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "split_qkv: qkv must be [batch, seq, kv_heads, group + 2, head_dim] with group >= 1, got " +
                    shape_text(qkv.sizes()));
  return split_heads(qkv);
}

std::array<at::Tensor, 3> rotary_qkv(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin,
                                     [[maybe_unused]] bool record_gradient_amax) {
  RECORD_FUNCTION("triax::rotary_qkv", std::vector<c10::IValue>());  // 3 launches on CUDA
  if (qkv.dim() != 5 || qkv.size(3) < 3 || qkv.size(4) % 2 != 0)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "rotary_qkv: qkv must be [batch, seq, kv_heads, group + 2, head_dim] with group >= 1 and an even "
                "head_dim, got " +
                    shape_text(qkv.sizes()));
  for (const at::Tensor* table : {&cos, &sin})
    if (table->dim() != 2 || table->size(0) != qkv.size(1) || table->size(1) != qkv.size(4))
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, std::string("rotary_qkv: ") + (table == &cos ? "cos " : "sin ") +
                                                    shape_text(table->sizes()) + " must be [seq, head_dim] = [" +
                                                    std::to_string(qkv.size(1)) + ", " + std::to_string(qkv.size(4)) +
                                                    "] to match qkv " + shape_text(qkv.sizes()));
#ifdef TRIAX_WITH_CUDA
  if (qkv.numel() > 0 && cuda_launch::kernels_apply({&qkv, &cos, &sin})) {
    if (cos.requires_grad() || sin.requires_grad())
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                  "rotary_qkv: cos and sin are constant tables; the CUDA kernel does not differentiate them "
                  "(detach them)");
    const variable_list outputs = RotaryQkvFunction::apply(qkv, cos, sin, record_gradient_amax);
    return {outputs[0], outputs[1], outputs[2]};
  }
#endif
  return rotary_qkv_composition(qkv, cos, sin);
}

}  // namespace triax
