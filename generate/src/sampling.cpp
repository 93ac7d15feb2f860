#include "triax/generate/sampling.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "triax/error.hpp"

namespace triax::generation {

void SamplingOptions::validate() const {
  if (!(temperature >= 0.0) || !std::isfinite(temperature))
    throw ConfigError("--temperature: expected 0 (greedy) or a positive number, got " + std::to_string(temperature));
  if (top_k < 0) throw ConfigError("--top-k: expected 0 (off) or a positive count, got " + std::to_string(top_k));
  if (!(top_p > 0.0 && top_p <= 1.0))
    throw ConfigError("--top-p: expected a probability in (0, 1], got " + std::to_string(top_p));
}

namespace {

// The uniforms as float on `device`, uploaded from pinned memory on CUDA: the host, a decoding step
// ahead of the device, does not wait there for the step before.
at::Tensor uniforms_on(const std::vector<double>& uniforms, const c10::Device& device) {
  const auto count = static_cast<int64_t>(uniforms.size());
  at::Tensor host = at::empty({count}, at::TensorOptions().dtype(at::kFloat).pinned_memory(device.is_cuda()));
  float* out = host.data_ptr<float>();
  for (int64_t i = 0; i < count; ++i) out[i] = static_cast<float>(uniforms[static_cast<size_t>(i)]);
  return host.to(device, /*non_blocking=*/true);
}

}  // namespace

at::Tensor choose_tokens(const at::Tensor& logits, const SamplingOptions& options,
                         const std::vector<double>& uniforms) {
  if (logits.dim() != 2 || logits.size(0) < 1 || logits.size(1) < 1)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "choose_tokens: logits must be [rows, vocabulary]");
  if (options.greedy()) return logits.argmax(-1);
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  if (static_cast<int64_t>(uniforms.size()) != rows)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "choose_tokens: one uniform number per row is needed");
  const float minus_infinity = -std::numeric_limits<float>::infinity();
  at::Tensor scores = logits.to(at::kFloat) / options.temperature;
  // Sorted once, most likely first: top-k is a prefix, the nucleus a prefix of that.
  auto [sorted, order] = scores.sort(-1, /*descending=*/true);
  if (options.top_k > 0 && options.top_k < vocab)
    sorted.narrow(1, options.top_k, vocab - options.top_k).fill_(minus_infinity);
  if (options.top_p < 1.0) {
    const at::Tensor probabilities = sorted.softmax(-1);
    // A token is cut when the tokens before it already hold top_p of the mass; the first stays.
    const at::Tensor mass_before = probabilities.cumsum(-1) - probabilities;
    sorted = sorted.masked_fill(mass_before >= options.top_p, minus_infinity);
  }
  const at::Tensor cdf = sorted.softmax(-1).cumsum(-1);
  const at::Tensor u = uniforms_on(uniforms, cdf.device());
  const at::Tensor target = (u * cdf.select(1, vocab - 1)).unsqueeze(1).contiguous();
  // The first token whose cumulative probability passes the target; a target rounded up to the
  // total mass takes the last token kept (cut tokens have probability 0 and are never chosen).
  const at::Tensor last_kept = at::isfinite(sorted).sum(-1, /*keepdim=*/true) - 1;
  const at::Tensor position =
      at::minimum(at::searchsorted(cdf.contiguous(), target, /*out_int32=*/false, /*right=*/true), last_kept);
  return order.gather(1, position).squeeze(1);
}

SamplingStreams::SamplingStreams(uint64_t seed, int64_t rows) {
  for (int64_t r = 0; r < rows; ++r) {
    std::seed_seq sequence{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(r),
                           0x67656eu};
    streams_.emplace_back(sequence);
  }
}

std::vector<double> SamplingStreams::next(const std::vector<int64_t>& rows) {
  std::vector<double> out;
  out.reserve(rows.size());
  for (int64_t r : rows) out.push_back(std::generate_canonical<double, 53>(streams_.at(static_cast<size_t>(r))));
  return out;
}

}  // namespace triax::generation
