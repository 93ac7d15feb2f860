// Ring attention (triax/layers/ring_attention.hpp).
#include "triax/layers/ring_attention.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <vector>

#include "triax/error.hpp"

namespace triax {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Posts sending `outgoing` to the next cp rank and receiving the previous rank's into `incoming`.
PendingCollective pass_on(const ContextParallel& cp, const at::Tensor& outgoing, const at::Tensor& incoming) {
  return cp.host.start_send_recv(TRIAX_GROUP_CP, outgoing, (cp.rank + 1) % cp.size, incoming,
                                 (cp.rank + cp.size - 1) % cp.size);
}

// The block held at `step`: the one of cp rank (rank - step) mod cp.
int source_at(const ContextParallel& cp, int step) { return (cp.rank - step + cp.size) % cp.size; }

class RingAttention : public torch::autograd::Function<RingAttention> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const ContextParallel& cp, double scale, const RingMasking& masking) {
    const RingBlocks blocks(cp.rank, cp.size, q.size(2) / 2, scale, masking, q.device());
    RingBlocks::Merged merged = RingBlocks::start(q);
    at::Tensor held = at::stack({k, v});  // [2, batch, kv_heads, local, head_dim]: this rank's first
    for (int step = 0; step < cp.size; ++step) {
      const bool last = step + 1 == cp.size;
      const at::Tensor incoming = last ? at::Tensor() : at::empty_like(held);
      PendingCollective transfer = last ? PendingCollective() : pass_on(cp, held, incoming);
      blocks.attend(q, held[0], held[1], source_at(cp, step), merged);
      transfer.wait();
      held = incoming;
    }
    const at::Tensor out = merged.out.to(q.scalar_type());
    ctx->save_for_backward({q, k, v, out, merged.lse});
    save_context_parallel(ctx, cp);
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["window"] = masking.window.value_or(0);
    ctx->saved_data["documents"] = masking.documents.defined() ? masking.documents : at::Tensor();
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    const ContextParallel cp = saved_context_parallel(ctx);
    const int64_t window = ctx->saved_data["window"].toInt();
    const RingMasking masking{window > 0 ? std::optional<int64_t>(window) : std::nullopt,
                              ctx->saved_data["documents"].toTensor()};
    const RingBlocks blocks(cp.rank, cp.size, q.size(2) / 2, ctx->saved_data["scale"].toDouble(), masking, q.device());
    const at::Tensor grad_out = grads[0].contiguous();

    at::Tensor dq = at::zeros(q.sizes(), lse.options());
    at::Tensor held = at::stack({k, v});  // the block of this step
    at::Tensor summed;                    // dk, dv of the previous step's block: the ranks' so far
    for (int step = 0; step < cp.size; ++step) {
      // Out go this block (for the next rank's next step) and the previous block's sums (for the
      // next rank's current step, which is that block).
      const bool last = step + 1 == cp.size;
      std::vector<at::Tensor> parts;
      if (!last) parts.push_back(held);
      if (step > 0) parts.push_back(summed);
      const at::Tensor outgoing = at::cat(parts);
      const at::Tensor incoming = at::empty_like(outgoing);
      PendingCollective transfer = pass_on(cp, outgoing, incoming);
      const auto [dk, dv] = blocks.backward(grad_out, q, held[0], held[1], out, lse, source_at(cp, step), dq);
      transfer.wait();
      const at::Tensor block_grads = at::stack({dk, dv});
      summed = step > 0 ? incoming.narrow(0, last ? 0 : 2, 2) + block_grads : block_grads;
      if (!last) held = incoming.narrow(0, 0, 2);
    }
    // `summed` now holds every rank's share for the block of rank + 1: to its owner.
    const at::Tensor own = at::empty_like(summed);
    pass_on(cp, summed.contiguous(), own).wait();
    return {dq.to(q.scalar_type()), own[0], own[1], at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

RingMasking ring_masking(const MaskedAttention& masked, std::optional<int64_t> window) {
  if (!masked.mask.defined() || masked.mask.scalar_type() != at::kLong)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "parallelism.context_parallel_attention: ring attention got no document inputs (int64) "
                "from context_parallel_attention_inputs");
  return {window, masked.mask.numel() > 0 ? masked.mask : at::Tensor()};
}

at::Tensor ring_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const ContextParallel& cp,
                          double scale, const RingMasking& masking) {
  if (q.dim() != 4 || k.dim() != 4 || q.size(2) % 2 != 0 || k.sizes() != v.sizes() || q.size(2) != k.size(2) ||
      k.size(1) == 0 || q.size(1) % k.size(1) != 0)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "ring attention: expected q [batch, heads, local, head_dim] and k, v [batch, kv_heads, local, "
                "head_dim] with kv_heads dividing heads and an even local length (two chunks)");
  return RingAttention::apply(q, k, v, cp, scale, masking);
}

}  // namespace triax
