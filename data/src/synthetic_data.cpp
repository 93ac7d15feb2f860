#include "triax/data/synthetic_data.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <random>

#include "triax/error.hpp"
#include "triax/init.hpp"

namespace triax {
namespace {

constexpr std::array<double, SyntheticTokenStream::kSuccessors> kProbabilities = {0.55, 0.25, 0.15, 0.05};

}  // namespace

SyntheticTokenStream::SyntheticTokenStream(int64_t vocab_size, int64_t sequence_length, uint64_t seed)
    : vocab_size_(vocab_size), sequence_length_(sequence_length), seed_(seed) {
  if (vocab_size < kSuccessors)
    throw ConfigError("synthetic data needs a vocabulary of at least " + std::to_string(kSuccessors) + " tokens, got " +
                      std::to_string(vocab_size));
  std::mt19937_64 rng(parameter_seed(seed, "synthetic-markov-chain"));
  std::uniform_int_distribution<int64_t> token(0, vocab_size - 1);
  successors_.resize(static_cast<size_t>(vocab_size));
  for (auto& next : successors_)
    for (auto& successor : next) successor = token(rng);
}

at::Tensor SyntheticTokenStream::samples(int64_t first, int64_t count) const {
  at::Tensor out = at::empty({count, sequence_length_ + 1}, at::TensorOptions().dtype(at::kLong));
  int64_t* data = out.data_ptr<int64_t>();
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int64_t row = 0; row < count; ++row) {
    std::mt19937_64 rng(parameter_seed(seed_, "synthetic-sample-" + std::to_string(first + row)));
    int64_t* tokens = data + row * (sequence_length_ + 1);
    tokens[0] = std::uniform_int_distribution<int64_t>(0, vocab_size_ - 1)(rng);
    for (int64_t i = 1; i <= sequence_length_; ++i) {
      double u = unit(rng);
      int choice = 0;
      while (choice < kSuccessors - 1 && u >= kProbabilities[static_cast<size_t>(choice)]) {
        u -= kProbabilities[static_cast<size_t>(choice)];
        ++choice;
      }
      tokens[i] = successors_[static_cast<size_t>(tokens[i - 1])][static_cast<size_t>(choice)];
    }
  }
  return out;
}

double SyntheticTokenStream::entropy_rate() {
  double h = 0;
  for (double p : kProbabilities) h -= p * std::log(p);
  return h;
}

}  // namespace triax
