#include "owner_exchange.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>

#include "triax/error.hpp"

namespace triax::plugins {

std::vector<int> balanced_owners(const std::vector<int64_t>& sizes, int ranks) {
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  std::vector<int64_t> load(static_cast<size_t>(std::max(ranks, 1)), 0);
  std::vector<int> owners(sizes.size(), 0);
  for (size_t item : order) {
    const auto least = std::min_element(load.begin(), load.end());  // the first of equal loads
    owners[item] = static_cast<int>(least - load.begin());
    *least += sizes[item];
  }
  return owners;
}

OwnerExchange::OwnerExchange(Host host, triax_group group, int rank, std::vector<int> owners,
                             std::vector<std::vector<int64_t>> pieces, at::TensorOptions options)
    : host_(host),
      group_(group),
      rank_(rank),
      owners_(std::move(owners)),
      pieces_(std::move(pieces)),
      options_(options) {
  if (pieces_.size() != owners_.size())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "owner exchange: " + std::to_string(owners_.size()) + " owners for " +
                                                  std::to_string(pieces_.size()) + " items");
  ranks_ = pieces_.empty() ? 1 : static_cast<int>(pieces_.front().size());
  for (size_t i = 0; i < pieces_.size(); ++i)
    if (static_cast<int>(pieces_[i].size()) != ranks_ || owners_[i] < 0 || owners_[i] >= ranks_)
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "owner exchange: item " + std::to_string(i) +
                                                    " has pieces or an owner outside the group of " +
                                                    std::to_string(ranks_));
  if (moves_anything() && (!host_.valid() || host_.size(group_) != ranks_))
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "owner exchange: pieces over " + std::to_string(ranks_) +
                                                  " ranks need the host's group of that size");
}

bool OwnerExchange::moves_anything() const {
  for (size_t i = 0; i < owners_.size(); ++i)
    for (int r = 0; r < ranks_; ++r)
      if (r != owners_[i] && pieces_[i][static_cast<size_t>(r)] > 0) return true;
  return false;
}

int64_t OwnerExchange::piece_offset(size_t item, int rank) const {
  return std::accumulate(pieces_[item].begin(), pieces_[item].begin() + rank, int64_t{0});
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> OwnerExchange::to_owner_splits() const {
  const auto me = static_cast<size_t>(rank_);
  std::vector<int64_t> send(static_cast<size_t>(ranks_), 0), receive(static_cast<size_t>(ranks_), 0);
  for (size_t i = 0; i < owners_.size(); ++i) {
    send[static_cast<size_t>(owners_[i])] += pieces_[i][me];
    if (owns(i))
      for (size_t r = 0; r < receive.size(); ++r) receive[r] += pieces_[i][r];
  }
  return {send, receive};
}

at::Tensor OwnerExchange::exchange(const std::vector<at::Tensor>& parts, const std::vector<int64_t>& send_splits,
                                   const std::vector<int64_t>& receive_splits) const {
  const at::Tensor send = parts.empty() ? at::empty({0}, options_) : at::cat(parts);
  at::Tensor received = at::empty({std::accumulate(receive_splits.begin(), receive_splits.end(), int64_t{0})}, options_);
  host_.all_to_all_v(group_, received, send, receive_splits, send_splits);
  return received;
}

std::vector<at::Tensor> OwnerExchange::gather(const std::vector<at::Tensor>& mine) const {
  std::vector<at::Tensor> owned(owners_.size());
  if (!moves_anything()) {  // every owned item is whole here already
    for (size_t i = 0; i < owners_.size(); ++i)
      if (owns(i)) owned[i] = mine[i].reshape({-1});
    return owned;
  }
  const auto [send_splits, receive_splits] = to_owner_splits();
  std::vector<at::Tensor> parts;
  for (int destination = 0; destination < ranks_; ++destination)  // rank-major, items in order
    for (size_t i = 0; i < owners_.size(); ++i)
      if (owners_[i] == destination) parts.push_back(mine[i].reshape({-1}).to(options_));
  const at::Tensor received = exchange(parts, send_splits, receive_splits);
  // Per source rank, its pieces of the items owned here, in item order.
  std::vector<std::vector<at::Tensor>> pieces(owners_.size());
  int64_t offset = 0;
  for (size_t source = 0; source < receive_splits.size(); ++source)
    for (size_t i = 0; i < owners_.size(); ++i)
      if (owns(i)) {
        pieces[i].push_back(received.narrow(0, offset, pieces_[i][source]));
        offset += pieces_[i][source];
      }
  for (size_t i = 0; i < owners_.size(); ++i)
    if (owns(i)) owned[i] = at::cat(pieces[i]);
  return owned;
}

std::vector<at::Tensor> OwnerExchange::scatter(const std::vector<at::Tensor>& owned) const {
  std::vector<at::Tensor> mine(owners_.size());
  if (!moves_anything()) {
    for (size_t i = 0; i < owners_.size(); ++i)
      if (owns(i)) mine[i] = owned[i];
    return mine;
  }
  const auto me = static_cast<size_t>(rank_);
  const auto [receive_splits, send_splits] = to_owner_splits();  // the way back
  std::vector<at::Tensor> parts;
  for (int destination = 0; destination < ranks_; ++destination)
    for (size_t i = 0; i < owners_.size(); ++i)
      if (owns(i))
        parts.push_back(owned[i].narrow(0, piece_offset(i, destination), pieces_[i][static_cast<size_t>(destination)])
                            .to(options_));
  const at::Tensor received = exchange(parts, send_splits, receive_splits);
  // Per owner rank, this rank's pieces of its items, in item order.
  int64_t offset = 0;
  for (int source = 0; source < ranks_; ++source)
    for (size_t i = 0; i < owners_.size(); ++i)
      if (owners_[i] == source) {
        mine[i] = received.narrow(0, offset, pieces_[i][me]);
        offset += pieces_[i][me];
      }
  return mine;
}

}  // namespace triax::plugins
