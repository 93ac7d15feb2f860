// A seeded permutation of [0, n) evaluated one position at a time, in constant time and memory:
// a balanced Feistel network over the smallest even number of bits that covers n, with
// cycle-walking back into [0, n). Each epoch of a dataset reads its samples in the order of a
// permutation keyed by (seed, dataset, epoch), so no index table is built however large the
// dataset, and any sample of any epoch can be found directly from its position.
#pragma once

#include <cstdint>

namespace triax::data {

class SamplePermutation {
 public:
  SamplePermutation(int64_t size, uint64_t key);

  int64_t size() const { return size_; }
  // The element at `position` (< size()); a bijection of [0, size()).
  int64_t operator()(int64_t position) const;

 private:
  uint64_t encrypt(uint64_t value) const;

  int64_t size_;
  uint64_t key_;
  int half_bits_ = 1;
  uint64_t half_mask_ = 1;
};

// A well-mixed 64-bit function (SplitMix64's finaliser): seeds and keys derived from indices.
uint64_t mix64(uint64_t value);

}  // namespace triax::data
