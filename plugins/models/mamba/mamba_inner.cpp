// mamba_inner(): the mixer's inner part as one autograd function over scan_passes.hpp's passes.
#include "mamba_inner.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <optional>
#include <vector>

#include "channel_major_products.hpp"
#include "scan_passes.hpp"

namespace triax::mamba {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The group, for the backward's all-reduce: AutogradContext keeps non-tensor state as IValues, and
// a capsule is the IValue that holds a C++ object.
struct GroupRecord : torch::CustomClassHolder {
  TensorParallel tp;
};

constexpr bool kSilu = true;  // the mixer's conv is followed by SiLU

struct MambaInnerFunction : torch::autograd::Function<MambaInnerFunction> {
  // The optional conv bias travels as std::optional: autograd functions take no undefined tensor.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& z,
                            const at::Tensor& conv_weight, const std::optional<at::Tensor>& conv_bias,
                            const at::Tensor& x_proj_weight, const at::Tensor& dt_proj_weight, const at::Tensor& A,
                            const at::Tensor& D, const at::Tensor& delta_bias,
                            const c10::intrusive_ptr<GroupRecord>& group) {
    const MambaInnerWeights w{conv_weight, conv_bias.value_or(at::Tensor()), x_proj_weight, dt_proj_weight, A, D,
                              delta_bias};
    // Autograd is off here (Function::apply): u and delta are freed when this returns.
    const at::Tensor u = causal_conv1d_forward_pass(x, w.conv_weight, w.conv_bias, kSilu);
    const at::Tensor projected = sum_over_channels(channel_major_product(w.x_proj_weight, u), group->tp);
    const ScanForwardPass scan = selective_scan_forward_pass(scan_operands(u, projected, z, w));
    ctx->save_for_backward({x, z, projected, scan.checkpoints, w.conv_weight, w.conv_bias, w.x_proj_weight,
                            w.dt_proj_weight, w.A, w.D, w.delta_bias});
    ctx->saved_data["group"] = c10::IValue::make_capsule(group);
    return scan.y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    variable_list out(10);  // one per input of forward, the group's record last
    if (!grads[0].defined()) return out;
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &z = saved[1], &projected = saved[2], &checkpoints = saved[3];
    const MambaInnerWeights w{saved[4], saved[5], saved[6], saved[7], saved[8], saved[9], saved[10]};
    const TensorParallel& tp =
        c10::static_intrusive_pointer_cast<GroupRecord>(ctx->saved_data["group"].toCapsule())->tp;

    const at::Tensor u = causal_conv1d_forward_pass(x, w.conv_weight, w.conv_bias, kSilu);  // u again
    const SelectiveScanArgs args = scan_operands(u, projected, z, w);                       // delta again
    const SelectiveScanGradients scan = selective_scan_backward_pass(args, checkpoints, grads[0]);
    const at::Tensor dt = projected.narrow(1, 0, w.dt_proj_weight.size(1));  // scan_operands's dt rows
    const ProductGradients dt_proj = channel_major_product_backward(w.dt_proj_weight, dt, scan.delta);
    // As the backward of scan_operands's split: the three gradients joined in one cat.
    const at::Tensor grad_projected = sum_over_channels_backward(at::cat({dt_proj.x, scan.B, scan.C}, 1), tp);
    const ProductGradients x_proj = channel_major_product_backward(w.x_proj_weight, u, grad_projected);
    const CausalConv1dGradients conv =
        causal_conv1d_backward_pass(x, w.conv_weight, w.conv_bias, kSilu, scan.u + x_proj.x);
    out[0] = conv.x;
    out[1] = scan.z;
    out[2] = conv.weight;
    out[3] = conv.bias;
    out[4] = x_proj.weight;
    out[5] = dt_proj.weight;
    out[6] = scan.A;
    out[7] = scan.D;
    out[8] = scan.delta_bias;
    return out;
  }
};

std::optional<at::Tensor> optional_of(const at::Tensor& t) {
  return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt;
}

}  // namespace

SelectiveScanArgs scan_operands(const at::Tensor& u, const at::Tensor& projected, const at::Tensor& z,
                                const MambaInnerWeights& weights) {
  const int64_t r = weights.dt_proj_weight.size(1), n = weights.A.size(1);
  // One split: its backward joins the three gradients in one cat, where three narrows would each
  // fill a zero tensor, copy into it, and add.
  const std::vector<at::Tensor> dt_B_C = projected.split_with_sizes({r, n, n}, 1);
  SelectiveScanArgs args;
  args.u = u;
  args.delta = channel_major_product(weights.dt_proj_weight, dt_B_C[0]);  // [b, d, s], before its bias
  args.A = weights.A;
  args.B = dt_B_C[1].contiguous();  // [b, n, s]
  args.C = dt_B_C[2].contiguous();  // [b, n, s]
  args.D = weights.D;
  args.z = z;
  args.delta_bias = weights.delta_bias;
  args.delta_softplus = true;
  return args;
}

at::Tensor mamba_inner(const at::Tensor& x, const at::Tensor& z, const MambaInnerWeights& weights,
                       const TensorParallel& tp) {
  auto group = c10::make_intrusive<GroupRecord>();
  group->tp = tp;
  return MambaInnerFunction::apply(x, z, weights.conv_weight, optional_of(weights.conv_bias), weights.x_proj_weight,
                                   weights.dt_proj_weight, weights.A, weights.D, weights.delta_bias, group);
}

}  // namespace triax::mamba
