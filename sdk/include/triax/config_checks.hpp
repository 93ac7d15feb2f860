#pragma once
// Checks every model plugin's config parser makes: sizes that must be positive and small enough
// for a tensor dimension, the model's parameter count, and the attention shape of a decoder with
// grouped-query attention and rotary embeddings. Each failure names the key through the reader
// (and so its path in the YAML).
#include <triax/config_reader.hpp>

#include <cstdint>
#include <sstream>
#include <string>

namespace triax {

// The largest size a config may give one tensor dimension: far above any model's, and small
// enough that products of two sizes and LibTorch's size arithmetic cannot overflow.
constexpr int64_t kMaxConfigSize = (int64_t{1} << 31) - 1;
// The most parameters a model config may describe (4.4e12): above any trained model; beyond it
// the sizes are a mistake, refused before LibTorch computes storage sizes that overflow.
constexpr double kMaxModelParameters = 4398046511104.0;

inline void require_positive(const ConfigReader& reader, const char* key, int64_t value) {
  if (value <= 0) reader.fail(key, "must be positive, got " + std::to_string(value));
  if (value > kMaxConfigSize)
    reader.fail(key, "is " + std::to_string(value) + ", more than the largest size a model config may give (" +
                         std::to_string(kMaxConfigSize) + ")");
}

// `parameters` is the model's parameter count from its sizes (in floating point, so that it
// cannot overflow); `keys` names the sizes it grows with, for the message.
inline void check_parameter_count(const ConfigReader& reader, const char* key, double parameters,
                                  const std::string& keys) {
  if (parameters <= kMaxModelParameters) return;
  std::ostringstream text;
  text << "these sizes make a model of " << parameters << " parameters, more than the " << kMaxModelParameters
       << " a config may describe (" << keys << ")";
  reader.fail(key, text.str());
}

inline void require_positive(const ConfigReader& reader, const char* key, double value) {
  if (!(value > 0.0)) reader.fail(key, "must be positive, got " + std::to_string(value));
}

inline void require_not_negative(const ConfigReader& reader, const char* key, double value) {
  if (!(value >= 0.0)) reader.fail(key, "must not be negative, got " + std::to_string(value));
}

// The query heads group evenly over num_key_value_heads.
inline void check_key_value_groups(const ConfigReader& reader, int64_t num_attention_heads,
                                   int64_t num_key_value_heads) {
  if (num_attention_heads % num_key_value_heads != 0)
    reader.fail("num_key_value_heads", "num_attention_heads (" + std::to_string(num_attention_heads) +
                                           ") is not divisible by num_key_value_heads (" +
                                           std::to_string(num_key_value_heads) + ")");
}

// hidden_size splits into num_attention_heads heads of an even size (rotary embeddings rotate
// pairs), and the query heads group evenly over num_key_value_heads.
inline void check_attention_shape(const ConfigReader& reader, int64_t hidden_size, int64_t num_attention_heads,
                                  int64_t num_key_value_heads) {
  if (hidden_size % num_attention_heads != 0)
    reader.fail("num_attention_heads", "hidden_size (" + std::to_string(hidden_size) +
                                           ") is not divisible by num_attention_heads (" +
                                           std::to_string(num_attention_heads) + ")");
  const int64_t head_dim = hidden_size / num_attention_heads;
  if (head_dim % 2 != 0)
    reader.fail("num_attention_heads", "the head dimension hidden_size / num_attention_heads = " +
                                           std::to_string(head_dim) + " must be even for rotary embeddings");
  check_key_value_groups(reader, num_attention_heads, num_key_value_heads);
}

// A head_dim given on its own (Qwen3's): positive and even (rotary embeddings rotate pairs), and
// the query heads group evenly over num_key_value_heads.
inline void check_head_dim(const ConfigReader& reader, int64_t head_dim, int64_t num_attention_heads,
                           int64_t num_key_value_heads) {
  require_positive(reader, "head_dim", head_dim);
  if (head_dim % 2 != 0) reader.fail("head_dim", std::to_string(head_dim) + " must be even for rotary embeddings");
  check_key_value_groups(reader, num_attention_heads, num_key_value_heads);
}

// A size the tensor-parallel group splits evenly (heads, features).
inline void require_divisible_by_tp(const ConfigReader& reader, const char* key, int64_t value, int tp_size) {
  if (value % tp_size != 0)
    reader.fail(key, std::to_string(value) + " is not divisible by the tensor parallel size " + std::to_string(tp_size));
}

}  // namespace triax
