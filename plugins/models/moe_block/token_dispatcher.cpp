#include "token_dispatcher.hpp"

#include <ATen/ATen.h>

#include "triax/error.hpp"
#include "triax/layers/all_to_all.hpp"

namespace triax::moe {
namespace {

std::vector<int64_t> to_vector(const at::Tensor& t) {
  const at::Tensor host = t.to(at::kLong).cpu().contiguous();
  return std::vector<int64_t>(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel());
}

// Sums of consecutive runs of `width` values.
std::vector<int64_t> block_sums(const std::vector<int64_t>& values, int64_t width) {
  std::vector<int64_t> sums(values.size() / static_cast<size_t>(width), 0);
  for (size_t i = 0; i < values.size(); ++i) sums[i / static_cast<size_t>(width)] += values[i];
  return sums;
}

at::Tensor inverse_permutation(const at::Tensor& permutation) { return at::argsort(permutation); }

}  // namespace

TokenDispatcher::Kind TokenDispatcher::kind_of(const std::string& name) {
  if (name == "alltoall") return Kind::AllToAll;
  if (name == "allgather") return Kind::AllGather;
  throw Error(TRIAX_ERROR_INVALID_CONFIG, "token_dispatcher_type '" + name + "': expected alltoall or allgather");
}

TokenDispatcher::TokenDispatcher(Kind kind, int64_t num_experts, const ModelContext& context)
    : kind_(kind),
      num_experts_(num_experts),
      local_experts_(num_experts / context.ep_size),
      first_expert_(context.ep_rank * (num_experts / context.ep_size)),
      ep_size_(context.ep_size),
      host_(context.host) {}

at::Tensor TokenDispatcher::run(const at::Tensor& rows, const at::Tensor& experts, const LocalExperts& compute) const {
  return kind_ == Kind::AllToAll ? all_to_all(rows, experts, compute) : all_gather(rows, experts, compute);
}

at::Tensor TokenDispatcher::all_to_all(const at::Tensor& rows, const at::Tensor& experts,
                                       const LocalExperts& compute) const {
  // Sorted by expert, the assignments are grouped by destination rank too (rank r holds experts
  // [r * local, (r + 1) * local)).
  const at::Tensor order = at::argsort(experts, /*stable=*/true);
  const at::Tensor per_expert = at::bincount(experts, {}, num_experts_);  // [E], on the device
  if (ep_size_ == 1) {
    const at::Tensor out = compute(rows.index_select(0, order), to_vector(per_expert));
    return out.index_select(0, inverse_permutation(order));
  }
  // Each rank tells each other rank how many rows it sends for each of that rank's experts:
  // received[s * local + e] rows come from rank s for local expert e.
  at::Tensor received = at::empty_like(per_expert);
  host_.all_to_all(TRIAX_GROUP_EP, received, per_expert.contiguous());
  const std::vector<int64_t> sent_counts = to_vector(per_expert), received_counts = to_vector(received);
  const std::vector<int64_t> send = block_sums(sent_counts, local_experts_);
  const std::vector<int64_t> receive = block_sums(received_counts, local_experts_);

  const at::Tensor arrived = all_to_all_v(rows.index_select(0, order), receive, send, TRIAX_GROUP_EP, host_);
  // Arrived rows are by source rank, then by expert: regroup them by expert.
  const at::Tensor local_ids = at::arange(local_experts_, experts.options()).repeat({ep_size_});
  const at::Tensor arrived_experts = at::repeat_interleave(local_ids, received.to(experts.device()));
  const at::Tensor by_expert = at::argsort(arrived_experts, /*stable=*/true);
  std::vector<int64_t> counts(static_cast<size_t>(local_experts_), 0);
  for (size_t i = 0; i < received_counts.size(); ++i) counts[i % static_cast<size_t>(local_experts_)] += received_counts[i];
  const at::Tensor served = compute(arrived.index_select(0, by_expert), counts).index_select(0, inverse_permutation(by_expert));
  const at::Tensor returned = all_to_all_v(served, send, receive, TRIAX_GROUP_EP, host_);
  return returned.index_select(0, inverse_permutation(order));
}

at::Tensor TokenDispatcher::all_gather(const at::Tensor& rows, const at::Tensor& experts,
                                       const LocalExperts& compute) const {
  const int64_t m = rows.size(0);
  const std::vector<int64_t> send(static_cast<size_t>(ep_size_), m);
  const std::vector<int64_t> receive = exchange_split_sizes(send, TRIAX_GROUP_EP, host_, rows.device());
  // Every rank's assignments, rank by rank (the all-gather as an all-to-all of copies, so that
  // its backward adds the gradients of every rank's use of a row).
  const at::Tensor gathered = all_to_all_v(rows.repeat({ep_size_, 1}), receive, send, TRIAX_GROUP_EP, host_);
  const at::Tensor gathered_experts = all_to_all_v(experts.repeat({ep_size_}), receive, send, TRIAX_GROUP_EP, host_);
  const at::Tensor local = gathered_experts - first_expert_;
  const at::Tensor mine = at::nonzero((local >= 0).logical_and(local < local_experts_)).reshape({-1});
  const at::Tensor mine_experts = local.index_select(0, mine);
  const at::Tensor by_expert = mine.index_select(0, at::argsort(mine_experts, /*stable=*/true));
  const at::Tensor served = compute(gathered.index_select(0, by_expert), to_vector(at::bincount(mine_experts, {}, local_experts_)));
  const at::Tensor results = at::zeros({gathered.size(0), rows.size(1)}, served.options()).index_add(0, by_expert, served);
  const at::Tensor returned = all_to_all_v(results, send, receive, TRIAX_GROUP_EP, host_);
  // Each row's result came from the one rank holding its expert; the others sent zeros.
  return returned.reshape({ep_size_, m, rows.size(1)}).sum(0);
}

}  // namespace triax::moe
