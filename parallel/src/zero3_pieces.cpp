#include "triax/parallel/zero3_pieces.hpp"

#include <ATen/ATen.h>

#include <algorithm>

#include "triax/core/comm/communicator.hpp"
#include "triax/error.hpp"

namespace triax {
namespace {

// [ranks of group, parameters, dims]: every rank's shard offsets (the groups' ranks hold the same
// parameters in the same order: one pipeline stage, one model).
at::Tensor gathered_offsets(const at::Tensor& mine, triax_group group, Communicator& communicator,
                            const c10::Device& device) {
  const int ranks = communicator.size(group);
  if (ranks == 1) return mine.unsqueeze(0);
  const bool on_device = std::string(communicator.backend_name()) == "nccl";
  const at::Tensor input = on_device ? mine.to(device) : mine;
  at::Tensor output = at::empty({ranks * mine.numel()}, input.options());
  communicator.all_gather(group, output, input.reshape({-1}));
  return output.cpu().view({ranks, mine.size(0), mine.size(1)});
}

// The smallest gap between distinct offsets of dimension d of parameter k, or 0 where all agree.
int64_t smallest_gap(const at::Tensor& offsets, int64_t k, int64_t d) {
  std::vector<int64_t> values;
  for (int64_t r = 0; r < offsets.size(0); ++r) values.push_back(offsets[r][k][d].item<int64_t>());
  std::sort(values.begin(), values.end());
  int64_t gap = 0;
  for (size_t i = 1; i < values.size(); ++i)
    if (values[i] != values[i - 1])
      gap = gap == 0 ? values[i] - values[i - 1] : std::min(gap, values[i] - values[i - 1]);
  return gap;
}

}  // namespace

Zero3Layout zero3_layout(const std::vector<NamedParameter>& parameters, Communicator& communicator,
                         const ReplicaGroups& groups, const c10::Device& device) {
  Zero3Layout layout;
  std::map<std::string, Zero3Piece>& pieces = layout.pieces;
  const bool any = std::any_of(parameters.begin(), parameters.end(),
                               [](const NamedParameter& p) { return (p.spec.flags & TRIAX_PARAM_ZERO3_SHARD) != 0; });
  if (!any) return layout;
  const auto count = static_cast<int64_t>(parameters.size());
  at::Tensor mine = at::zeros({count, TRIAX_MAX_TENSOR_DIMS}, at::TensorOptions().dtype(at::kLong));
  for (int64_t k = 0; k < count; ++k) {
    const std::vector<int64_t>& offset = parameters[static_cast<size_t>(k)].spec.shard_offset;
    for (size_t d = 0; d < offset.size(); ++d) mine[k][static_cast<int64_t>(d)] = offset[d];
  }
  const at::Tensor by_tp = gathered_offsets(mine, TRIAX_GROUP_TP, communicator, device);
  const at::Tensor by_ep = gathered_offsets(mine, TRIAX_GROUP_EP, communicator, device);
  for (int64_t k = 0; k < count; ++k) {
    const NamedParameter& p = parameters[static_cast<size_t>(k)];
    if ((p.spec.flags & TRIAX_PARAM_ZERO3_SHARD) == 0) continue;
    Zero3Piece piece;
    int64_t numel = 1;
    for (size_t d = 0; d < p.spec.global_shape.size(); ++d) {
      int64_t extent = p.spec.global_shape[d];
      for (const at::Tensor* offsets : {&by_tp, &by_ep}) {
        const int64_t gap = smallest_gap(*offsets, k, static_cast<int64_t>(d));
        if (gap > 0) extent = std::min(extent, gap);
      }
      piece.box_shape.push_back(extent);
      numel *= extent;
    }
    const triax_group group = p.spec.gradient_group;
    piece.range = zero_shard(numel, groups.rank(group), groups.size(group));
    if (piece.range.length != p.tensor.numel())
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                  "ZeRO-3 parameter '" + p.name + "' holds " + std::to_string(p.tensor.numel()) +
                      " elements; its tensor-parallel shard of " + std::to_string(numel) + " elements gives rank " +
                      std::to_string(groups.rank(group)) + " of " + std::to_string(groups.size(group)) + " " +
                      std::to_string(piece.range.length));
    pieces.emplace(p.name, std::move(piece));
  }
  return layout;
}

NamedParameter whole_box(const NamedParameter& parameter, const Zero3Piece& piece, at::ScalarType dtype) {
  NamedParameter box;
  box.name = parameter.name;
  box.tensor = at::zeros(piece.box_shape, parameter.tensor.options().dtype(dtype).requires_grad(false));
  box.spec = parameter.spec;
  box.spec.flags &= ~static_cast<uint32_t>(TRIAX_PARAM_ZERO3_SHARD);
  return box;
}

}  // namespace triax
