// Choosing the next token from a model's logits: greedy (the most likely token) or sampling at a
// temperature from the top-k tokens and/or the top-p nucleus (transformers' order: temperature,
// then top-k, then top-p).
//
// Sampling draws by inverse CDF with one uniform number per row, so the whole choice runs
// batched on the logits' device and only the uniforms come from the host: row r's numbers come
// from its own stream seeded by (seed, r), so a sequence's samples do not depend on which other
// sequences share its batch or when they stop.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <random>
#include <vector>

namespace triax::generation {

struct SamplingOptions {
  double temperature = 0.0;  // 0: greedy
  int64_t top_k = 0;         // 0: no top-k cut
  double top_p = 1.0;        // 1: no nucleus cut

  bool greedy() const { return temperature == 0.0; }
  // Refuses a negative temperature, a negative top_k or a top_p outside (0, 1], naming the flag.
  void validate() const;
};

// The next token of each row: logits [rows, vocab] (any floating dtype, any device) and, unless
// greedy, uniforms[r] in [0, 1) for row r. Returns [rows] int64 on the logits' device.
at::Tensor choose_tokens(const at::Tensor& logits, const SamplingOptions& options, const std::vector<double>& uniforms);

// One random stream per row, seeded by (seed, row).
class SamplingStreams {
 public:
  SamplingStreams(uint64_t seed, int64_t rows);
  // The next uniform of each listed row.
  std::vector<double> next(const std::vector<int64_t>& rows);

 private:
  std::vector<std::mt19937_64> streams_;
};

}  // namespace triax::generation
