#include "triax/data/sample_permutation.hpp"

#include "triax/error.hpp"

namespace triax::data {
namespace {

constexpr int kRounds = 4;  // enough for a shuffle (no cryptographic claim)

}  // namespace

uint64_t mix64(uint64_t value) {
  value += 0x9e3779b97f4a7c15ULL;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ULL;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebULL;
  return value ^ (value >> 31);
}

SamplePermutation::SamplePermutation(int64_t size, uint64_t key) : size_(size), key_(mix64(key)) {
  if (size < 1) throw Error("a permutation needs at least one element");
  while ((uint64_t{1} << (2 * half_bits_)) < static_cast<uint64_t>(size)) ++half_bits_;
  half_mask_ = (uint64_t{1} << half_bits_) - 1;
}

uint64_t SamplePermutation::encrypt(uint64_t value) const {
  uint64_t left = value >> half_bits_;
  uint64_t right = value & half_mask_;
  for (int round = 0; round < kRounds; ++round) {
    const uint64_t next = left ^ (mix64(key_ ^ (static_cast<uint64_t>(round) << 58) ^ right) & half_mask_);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

int64_t SamplePermutation::operator()(int64_t position) const {
  // The network permutes [0, 4^half_bits), less than 4 * size: walking the cycle from an
  // element inside [0, size) returns inside it after fewer than 4 steps on average.
  uint64_t value = static_cast<uint64_t>(position);
  do {
    value = encrypt(value);
  } while (value >= static_cast<uint64_t>(size_));
  return static_cast<int64_t>(value);
}

}  // namespace triax::data
