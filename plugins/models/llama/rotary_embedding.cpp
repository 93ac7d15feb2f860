#include "rotary_embedding.hpp"

#include <ATen/ATen.h>

#include "triax/error.hpp"

namespace triax::llama {
namespace {

constexpr double kPi = 3.141592653589793;  // Python's math.pi

// transformers: 1.0 / (base ** (arange(0, dim, 2, int64).float() / dim)); `1.0 / t` is
// t.reciprocal() * 1.0 in PyTorch, and multiplying by 1.0 is exact.
at::Tensor default_inverse_frequencies(double base, int64_t dim, c10::Device device) {
  at::Tensor steps = at::arange(0, dim, 2, at::TensorOptions().dtype(at::kLong).device(device));
  at::Tensor exponents = steps.to(at::kFloat) / dim;
  return at::pow(base, exponents).reciprocal();
}

// transformers' _compute_llama3_parameters, operation for operation (a Python `scalar / t` is
// t.reciprocal() * scalar, `1 - t` is rsub).
at::Tensor llama3_inverse_frequencies(at::Tensor inv_freq, const RopeScaling& s) {
  const double old_context_len = static_cast<double>(s.original_max_position_embeddings);
  const double low_freq_wavelen = old_context_len / s.low_freq_factor;
  const double high_freq_wavelen = old_context_len / s.high_freq_factor;

  at::Tensor wavelen = inv_freq.reciprocal() * (2.0 * kPi);
  // wavelen < high_freq_wavelen: unchanged; wavelen > low_freq_wavelen: divided by factor
  at::Tensor scaled = at::where(wavelen > low_freq_wavelen, inv_freq / s.factor, inv_freq);
  // in between: interpolated with a smooth factor
  at::Tensor smooth =
      (wavelen.reciprocal() * old_context_len - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  at::Tensor smoothed = at::rsub(smooth, 1) * scaled / s.factor + smooth * scaled;
  at::Tensor is_medium = at::logical_not(wavelen < high_freq_wavelen) * at::logical_not(wavelen > low_freq_wavelen);
  return at::where(is_medium, smoothed, scaled);
}

at::Tensor inverse_frequencies_on(const LlamaConfig& config, c10::Device device) {
  at::Tensor inv_freq = default_inverse_frequencies(config.rope_theta, config.head_dim(), device);
  if (!config.rope_scaling) return inv_freq;
  const RopeScaling& scaling = *config.rope_scaling;
  if (scaling.type == "linear") return inv_freq / scaling.factor;
  if (scaling.type == "llama3") return llama3_inverse_frequencies(inv_freq, scaling);
  throw Error(TRIAX_ERROR_UNSUPPORTED, "rope_scaling type '" + scaling.type + "' is not implemented");
}

}  // namespace

at::Tensor rope_inverse_frequencies(const LlamaConfig& config) {
  return inverse_frequencies_on(config, c10::Device(c10::kCPU));
}

RotaryEmbedding::RotaryEmbedding(const LlamaConfig& config, c10::Device device) {
  at::Tensor inv_freq = inverse_frequencies_on(config, device);
  // transformers: freqs = inv_freq @ positions.float() (one product per entry), emb = cat(freqs,
  // freqs), cos = emb.cos() * attention_scaling (1.0 for default, linear and llama3).
  at::Tensor positions =
      at::arange(config.max_position_embeddings, at::TensorOptions().dtype(at::kLong).device(device)).to(at::kFloat);
  at::Tensor freqs = at::outer(positions, inv_freq);
  at::Tensor angles = at::cat({freqs, freqs}, -1);
  cos_ = register_buffer("cos_cached", angles.cos());
  sin_ = register_buffer("sin_cached", angles.sin());
}

std::pair<at::Tensor, at::Tensor> RotaryEmbedding::tables(int64_t sequence_length, c10::ScalarType dtype) const {
  if (sequence_length > cos_.size(0))
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "sequence length " + std::to_string(sequence_length) +
                                                  " exceeds model.model_config.max_position_embeddings (" +
                                                  std::to_string(cos_.size(0)) + ")");
  return {cos_.narrow(0, 0, sequence_length).to(dtype), sin_.narrow(0, 0, sequence_length).to(dtype)};
}

}  // namespace triax::llama
