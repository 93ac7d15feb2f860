// Context parallelism inside a model (triax/layers/context_parallel.hpp).
#include "triax/layers/context_parallel.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstddef>
#include <string>

#include "triax/error.hpp"
#include "triax/layers/context_parallel_slice.hpp"

namespace triax {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The cp collectives join and split along dim 0: `dim` goes first, then back.
at::Tensor gather_along(const at::Tensor& x, int64_t dim, const ContextParallel& cp) {
  const at::Tensor first = x.movedim(dim, 0).contiguous();
  std::vector<int64_t> shape = first.sizes().vec();
  shape[0] *= cp.size;
  at::Tensor gathered = at::empty(shape, first.options());
  cp.host.all_gather(TRIAX_GROUP_CP, gathered, first);
  return gathered.movedim(0, dim);
}

at::Tensor reduce_scatter_along(const at::Tensor& x, int64_t dim, const ContextParallel& cp) {
  const at::Tensor first = x.movedim(dim, 0).contiguous();
  std::vector<int64_t> shape = first.sizes().vec();
  shape[0] /= cp.size;
  at::Tensor shard = at::empty(shape, first.options());
  cp.host.reduce_scatter(TRIAX_GROUP_CP, shard, first, TRIAX_REDUCE_SUM);
  return shard.movedim(0, dim);
}

// K and V stacked as [2, batch, kv_heads, local, head_dim]: gathered along the sequence (dim 3).
class GatherKeysValues : public torch::autograd::Function<GatherKeysValues> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& stacked, const ContextParallel& cp) {
    save_context_parallel(ctx, cp);
    return gather_along(stacked, 3, cp);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const ContextParallel cp = saved_context_parallel(ctx);
    return {reduce_scatter_along(grads[0], 3, cp), at::Tensor()};
  }
};

// Each token's document, [batch, sequence] in sequence order: documents start where the
// in-document positions (positions: this rank's, [batch, local]) restart at 0 along the whole
// sequence. keys: where the gathered tokens sit. Collective over cp.
at::Tensor sequence_documents(const at::Tensor& positions, const at::Tensor& keys, const ContextParallel& cp) {
  const at::Tensor gathered = gather_along(positions, 1, cp);  // [batch, sequence], keys' order
  const at::Tensor in_order = at::empty_like(gathered).index_copy_(1, keys, gathered);
  return (in_order == 0).cumsum(1);
}

}  // namespace

void save_context_parallel(AutogradContext* ctx, const ContextParallel& cp) {
  // AutogradContext keeps non-tensor state as IValues: the host table travels as its address.
  ctx->saved_data["host"] = static_cast<int64_t>(reinterpret_cast<std::uintptr_t>(cp.host.c_host()));
  ctx->saved_data["rank"] = static_cast<int64_t>(cp.rank);
  ctx->saved_data["size"] = static_cast<int64_t>(cp.size);
  ctx->saved_data["ring"] = cp.ring;
}

ContextParallel saved_context_parallel(AutogradContext* ctx) {
  ContextParallel cp;
  cp.host = Host(reinterpret_cast<const triax_host*>(static_cast<std::uintptr_t>(ctx->saved_data["host"].toInt())));
  cp.rank = static_cast<int>(ctx->saved_data["rank"].toInt());
  cp.size = static_cast<int>(ctx->saved_data["size"].toInt());
  cp.ring = ctx->saved_data["ring"].toBool();
  return cp;
}

ContextParallel ContextParallel::of(const ModelContext& context) {
  ContextParallel cp = of(context.host);
  cp.ring = context.cp_ring_attention;
  return cp;
}

ContextParallel ContextParallel::of(const Host& host) {
  ContextParallel cp;
  cp.host = host;
  const triax_host* c = host.c_host();
  // TRIAX_GROUP_CP exists from ABI 1.10 on, the version that added start_send_recv.
  if (c == nullptr || c->struct_size < offsetof(triax_host, start_send_recv) + sizeof(c->start_send_recv)) return cp;
  cp.rank = host.rank(TRIAX_GROUP_CP);
  cp.size = host.size(TRIAX_GROUP_CP);
  return cp;
}

MaskedAttention context_parallel_attention_inputs(const AttentionMasking& masking, const at::Tensor& position_ids,
                                                  int64_t local_length, const ContextParallel& cp,
                                                  c10::Device device) {
  if (!position_ids.defined() || position_ids.dim() != 2 || position_ids.size(1) != local_length)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "parallelism.context_parallel_size: the forward needs position_ids [batch, " +
                    std::to_string(local_length) +
                    "] (each token's place in the sequence; the host passes them with every micro-batch)");
  const ContextParallelSlice slice(local_length * cp.size, cp.rank, cp.size);
  const at::Tensor queries = slice.token_indices(device), keys = slice.gathered_token_indices(device);
  const at::Tensor positions = position_ids.to(device);
  if (cp.ring) {  // ring_attention.hpp builds each block's mask itself: it needs only the documents
    const at::Tensor documents =
        masking.documents ? sequence_documents(positions, keys, cp) : at::empty({0}, positions.options());
    return {documents, positions};
  }
  at::Tensor visible = causal_visibility(queries, keys, masking.sliding_window);  // [local, sequence]
  if (!masking.documents) return {visible, positions};
  const at::Tensor document = sequence_documents(positions, keys, cp);  // [batch, sequence]
  const at::Tensor same = document.index_select(1, queries).unsqueeze(2) == document.index_select(1, keys).unsqueeze(1);
  return {(same & visible).unsqueeze(1), positions};
}

std::array<at::Tensor, 2> gather_keys_values(const at::Tensor& k, const at::Tensor& v, const ContextParallel& cp) {
  if (!cp.active()) return {k, v};
  const at::Tensor gathered = GatherKeysValues::apply(at::stack({k, v}), cp);
  return {gathered[0], gathered[1]};
}

at::Tensor context_parallel_loss_weight(const at::Tensor& label_mask, int64_t tokens, const ContextParallel& cp,
                                        c10::Device device) {
  const auto options = at::TensorOptions().dtype(at::kDouble).device(device);
  const at::Tensor counted = label_mask.defined() ? label_mask.detach().to(options).sum().reshape({1})
                                                  : at::full({1}, static_cast<double>(tokens), options);
  at::Tensor group = counted.clone();
  cp.host.all_reduce(TRIAX_GROUP_CP, group, TRIAX_REDUCE_SUM);
  return (counted * cp.size / group.clamp_min(1.0)).reshape({}).to(at::kFloat);
}

}  // namespace triax
