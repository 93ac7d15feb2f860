// Moving routed tokens to the ep ranks that hold their experts and the results back (dropless:
// every assignment is served, however uneven the load).
//
//   alltoall   each rank sends each assignment once, to the rank of its expert (variable-split
//              all-to-all over TRIAX_GROUP_EP), and receives its result the same way back.
//   allgather  every rank receives every rank's assignments, serves those of its own experts and
//              sends each rank its results (zero rows for the others' experts), which that rank
//              adds up over the group: more traffic, no dependence on the routing for the splits.
//
// Both go through the SDK's differentiable all_to_all_v, so gradients travel the reverse way. A
// rank or an expert that receives nothing still takes part in every exchange (zero-row splits).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "triax/host.hpp"
#include "triax/model.hpp"

namespace triax::moe {

// The local experts' computation: rows grouped by local expert (counts[e] rows for expert e) ->
// one output row per input row.
using LocalExperts = std::function<at::Tensor(const at::Tensor& rows, const std::vector<int64_t>& counts)>;

class TokenDispatcher {
 public:
  enum class Kind { AllToAll, AllGather };
  static Kind kind_of(const std::string& name);  // "alltoall" | "allgather"

  TokenDispatcher(Kind kind, int64_t num_experts, const ModelContext& context);

  // rows: [M, hidden], one per (token, slot) assignment; experts: [M] int64, the global expert of
  // each. Returns [M, hidden]: each row's expert output. Collective over the ep group.
  at::Tensor run(const at::Tensor& rows, const at::Tensor& experts, const LocalExperts& compute) const;

 private:
  at::Tensor all_to_all(const at::Tensor& rows, const at::Tensor& experts, const LocalExperts& compute) const;
  at::Tensor all_gather(const at::Tensor& rows, const at::Tensor& experts, const LocalExperts& compute) const;

  Kind kind_;
  int64_t num_experts_, local_experts_, first_expert_;
  int ep_size_;
  Host host_;
};

}  // namespace triax::moe
