#pragma once
// Checks every model plugin's config parser makes: sizes that must be positive, and the
// attention shape of a decoder with grouped-query attention and rotary embeddings. Each failure
// names the key through the reader (and so its path in the YAML).
#include <triax/config_reader.hpp>

#include <cstdint>
#include <string>

namespace triax {

inline void require_positive(const ConfigReader& reader, const char* key, int64_t value) {
  if (value <= 0) reader.fail(key, "must be positive, got " + std::to_string(value));
}

inline void require_positive(const ConfigReader& reader, const char* key, double value) {
  if (!(value > 0.0)) reader.fail(key, "must be positive, got " + std::to_string(value));
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
  if (num_attention_heads % num_key_value_heads != 0)
    reader.fail("num_key_value_heads", "num_attention_heads (" + std::to_string(num_attention_heads) +
                                           ") is not divisible by num_key_value_heads (" +
                                           std::to_string(num_key_value_heads) + ")");
}

// A size the tensor-parallel group splits evenly (heads, features).
inline void require_divisible_by_tp(const ConfigReader& reader, const char* key, int64_t value, int tp_size) {
  if (value % tp_size != 0)
    reader.fail(key, std::to_string(value) + " is not divisible by the tensor parallel size " + std::to_string(tp_size));
}

}  // namespace triax
