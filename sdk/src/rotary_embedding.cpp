#include "triax/layers/rotary_embedding.hpp"

#include <ATen/ATen.h>

#include "triax/error.hpp"

namespace triax {
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

at::Tensor inverse_frequencies_on(const RopeOptions& options, c10::Device device) {
  at::Tensor inv_freq = default_inverse_frequencies(options.theta, options.head_dim, device);
  if (!options.scaling) return inv_freq;
  const RopeScaling& scaling = *options.scaling;
  if (scaling.type == "linear") return inv_freq / scaling.factor;
  if (scaling.type == "llama3") return llama3_inverse_frequencies(inv_freq, scaling);
  throw Error(TRIAX_ERROR_UNSUPPORTED, "rope_scaling type '" + scaling.type + "' is not implemented");
}

void require_positive(ConfigReader& reader, const char* key, int64_t value) {
  if (value <= 0) reader.fail(key, "must be positive, got " + std::to_string(value));
}

void require_positive(ConfigReader& reader, const char* key, double value) {
  if (!(value > 0.0)) reader.fail(key, "must be positive, got " + std::to_string(value));
}

}  // namespace

std::optional<RopeScaling> read_rope_scaling(ConfigReader& parent) {
  std::optional<ConfigReader> reader = parent.optional_section("rope_scaling");
  if (!reader) return std::nullopt;
  // Hugging Face writes `rope_type`; older configs write `type`.
  std::optional<std::string> rope_type = reader->optional<std::string>("rope_type");
  std::optional<std::string> legacy_type = reader->optional<std::string>("type");
  if (rope_type && legacy_type && *rope_type != *legacy_type)
    reader->fail("type", "'" + *legacy_type + "' disagrees with rope_type '" + *rope_type + "'");
  if (!rope_type && !legacy_type)
    reader->fail("rope_type", "required key is missing (expected one of: default, linear, llama3)");
  const std::string type = rope_type ? *rope_type : *legacy_type;
  const char* type_key = rope_type ? "rope_type" : "type";

  std::optional<RopeScaling> out;
  if (type == "default") {
    // Plain RoPE: same as rope_scaling: null.
  } else if (type == "linear") {
    RopeScaling scaling;
    scaling.type = type;
    scaling.factor = reader->required<double>("factor");
    require_positive(*reader, "factor", scaling.factor);
    out = scaling;
  } else if (type == "llama3") {
    RopeScaling scaling;
    scaling.type = type;
    scaling.factor = reader->required<double>("factor");
    scaling.low_freq_factor = reader->required<double>("low_freq_factor");
    scaling.high_freq_factor = reader->required<double>("high_freq_factor");
    scaling.original_max_position_embeddings = reader->required<int64_t>("original_max_position_embeddings");
    require_positive(*reader, "factor", scaling.factor);
    require_positive(*reader, "low_freq_factor", scaling.low_freq_factor);
    if (!(scaling.high_freq_factor > scaling.low_freq_factor))
      reader->fail("high_freq_factor", "must be greater than low_freq_factor (" +
                                           std::to_string(scaling.low_freq_factor) + "), got " +
                                           std::to_string(scaling.high_freq_factor));
    require_positive(*reader, "original_max_position_embeddings", scaling.original_max_position_embeddings);
    out = scaling;
  } else if (type == "dynamic" || type == "yarn" || type == "longrope") {
    reader->fail(type_key, "'" + type + "' RoPE scaling is not implemented (supported: default, linear, llama3)");
  } else {
    reader->fail(type_key, "expected one of: default, linear, llama3; got '" + type + "'");
  }
  reader->finish();
  return out;
}

at::Tensor rope_inverse_frequencies(const RopeOptions& options) {
  return inverse_frequencies_on(options, c10::Device(c10::kCPU));
}

RotaryEmbedding::RotaryEmbedding(const RopeOptions& options, c10::Device device) : options_(options) {
  cos_ = register_buffer("cos_cached", at::empty({0}, at::TensorOptions().device(device)));
  sin_ = register_buffer("sin_cached", at::empty({0}, at::TensorOptions().device(device)));
  compute(options.max_positions);
}

void RotaryEmbedding::compute(int64_t positions) {
  const c10::Device device = cos_.device();
  at::Tensor inv_freq = inverse_frequencies_on(options_, device);
  // transformers: freqs = inv_freq @ positions.float() (one product per entry), emb = cat(freqs,
  // freqs), cos = emb.cos() * attention_scaling (1.0 for default, linear and llama3). Each entry
  // depends on its position alone: an extended table starts with the same values.
  at::Tensor steps = at::arange(positions, at::TensorOptions().dtype(at::kLong).device(device)).to(at::kFloat);
  at::Tensor freqs = at::outer(steps, inv_freq);
  at::Tensor angles = at::cat({freqs, freqs}, -1);
  // The registered buffers take the new values in place (a module registers a name once).
  cos_.set_(angles.cos());
  sin_.set_(angles.sin());
}

std::pair<at::Tensor, at::Tensor> RotaryEmbedding::tables(int64_t sequence_length, c10::ScalarType dtype) {
  if (sequence_length > cos_.size(0)) {
    if (!options_.extends)
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "sequence length " + std::to_string(sequence_length) +
                                                    " exceeds model.model_config.max_position_embeddings (" +
                                                    std::to_string(cos_.size(0)) + ")");
    compute(sequence_length);
  }
  return {cos_.narrow(0, 0, sequence_length).to(dtype), sin_.narrow(0, 0, sequence_length).to(dtype)};
}

}  // namespace triax
