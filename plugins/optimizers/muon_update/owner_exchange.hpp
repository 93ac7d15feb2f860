// Pieces of tensors held across the ranks of one group, moved to one owning rank per tensor and
// back: one all_to_all_v each way for all of them. Distributed Muon gathers the pieces of each
// matrix (ZeRO-1's ranges over dp, tensor-parallel shards over tp) on its owner, which
// orthogonalises the whole matrix, and sends every rank its piece of the result.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "triax/host.hpp"

namespace triax::plugins {

// Owners balanced by size: each item, largest first (ties in item order), goes to the rank with
// the least load so far (ties: the lowest rank). The same on every rank that computes it.
std::vector<int> balanced_owners(const std::vector<int64_t>& sizes, int ranks);

class OwnerExchange {
 public:
  // Items 0..n-1, the same list on every rank of `group`: owners[i] is the group rank that owns
  // item i, pieces[i][r] the elements of it that group rank r holds; `rank` is this rank's. The
  // pieces travel with `options` (their dtype and device).
  OwnerExchange(Host host, triax_group group, int rank, std::vector<int> owners,
                std::vector<std::vector<int64_t>> pieces, at::TensorOptions options);

  bool owns(size_t item) const { return owners_[item] == rank_; }
  size_t size() const { return owners_.size(); }

  // mine[i]: this rank's piece of item i (1-D, all of one dtype and device). Returns, for each item
  // this rank owns, every rank's piece concatenated in rank order; undefined for the others.
  std::vector<at::Tensor> gather(const std::vector<at::Tensor>& mine) const;
  // The reverse: owned[i] for each item this rank owns (1-D, every rank's piece in rank order;
  // the others are not read). Returns this rank's piece of every item.
  std::vector<at::Tensor> scatter(const std::vector<at::Tensor>& owned) const;

 private:
  // One all_to_all_v of the concatenated parts, the splits counted per rank; returns what came.
  at::Tensor exchange(const std::vector<at::Tensor>& parts, const std::vector<int64_t>& send_splits,
                      const std::vector<int64_t>& receive_splits) const;
  // Whether any piece leaves its rank at all (the same answer on every rank).
  bool moves_anything() const;
  // Where group rank r's piece starts within item i's concatenation.
  int64_t piece_offset(size_t item, int rank) const;
  // Per rank of the group: the elements this rank sends it and receives from it when the pieces
  // go to their owners (the way back swaps the two).
  std::pair<std::vector<int64_t>, std::vector<int64_t>> to_owner_splits() const;

  Host host_;
  triax_group group_;
  int rank_ = 0;
  int ranks_ = 1;
  std::vector<int> owners_;
  std::vector<std::vector<int64_t>> pieces_;
  at::TensorOptions options_;
};

}  // namespace triax::plugins
