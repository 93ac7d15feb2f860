// The built-in synthetic token stream used when a data stage says `dataset: null`.
//
// Tokens follow a fixed, seeded first-order Markov chain: each token has four possible
// successors with probabilities 0.55 / 0.25 / 0.15 / 0.05. A model can learn it quickly, so the
// loss visibly falls from ln(vocab) towards the chain's entropy rate (about 1.11 nats), the
// floor no model can beat. Sample i depends only on (seed, i): any data-parallel rank can
// produce any sample, and a resumed run continues with exactly the next ones.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <vector>

namespace triax {

class SyntheticTokenStream {
 public:
  static constexpr int kSuccessors = 4;

  SyntheticTokenStream(int64_t vocab_size, int64_t sequence_length, uint64_t seed);

  // Samples [first, first + count), each sequence_length + 1 tokens: [count, seq + 1] int64.
  at::Tensor samples(int64_t first, int64_t count) const;
  // Entropy of the next token given the previous one, in nats: the loss floor.
  static double entropy_rate();

 private:
  int64_t vocab_size_;
  int64_t sequence_length_;
  uint64_t seed_;
  std::vector<std::array<int64_t, kSuccessors>> successors_;  // per token
};

}  // namespace triax
