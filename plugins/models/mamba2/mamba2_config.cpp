#include "mamba2_config.hpp"

#include <triax/config_checks.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

namespace triax::mamba2 {
namespace {

std::string text(int64_t value) { return std::to_string(value); }

// time_step_limit: null (no clamp) or [low, high] with 0 <= low <= high.
void read_time_step_limit(ConfigReader& reader, Mamba2Config& c) {
  const std::optional<std::vector<double>> limit = reader.optional<std::vector<double>>("time_step_limit");
  if (!limit) {
    reader.resolved()["time_step_limit"] = YAML::Node(YAML::NodeType::Null);
    return;
  }
  if (limit->size() != 2 || (*limit)[0] < 0.0 || (*limit)[1] < (*limit)[0])
    reader.fail("time_step_limit", "expected null (no clamp) or [low, high] with 0 <= low <= high");
  c.time_step_limit_low = (*limit)[0];
  c.time_step_limit_high = (*limit)[1];
}

void read_keys(ConfigReader& reader, Mamba2Config& c) {
  if (!reader.get<bool>("is_mamba2_config", true))
    reader.fail("is_mamba2_config", "the mamba2 model plugin needs is_mamba2_config: true (or the key left out)");
  c.hidden_size = reader.get<int64_t>("hidden_size", c.hidden_size);
  c.num_hidden_layers = reader.get<int64_t>("num_hidden_layers", c.num_hidden_layers);
  c.vocab_size = reader.get<int64_t>("vocab_size", c.vocab_size);
  c.num_heads = reader.get<int64_t>("num_heads", c.num_heads);
  c.head_dim = reader.get<int64_t>("head_dim", c.head_dim);
  c.state_size = reader.get<int64_t>("state_size", c.state_size);
  c.n_groups = reader.get<int64_t>("n_groups", c.n_groups);
  c.expand = reader.get<int64_t>("expand", c.expand);
  c.conv_kernel = reader.get<int64_t>("conv_kernel", c.conv_kernel);
  c.chunk_size = reader.get<int64_t>("chunk_size", c.chunk_size);
  c.use_bias = reader.get<bool>("use_bias", c.use_bias);
  c.use_conv_bias = reader.get<bool>("use_conv_bias", c.use_conv_bias);
  c.layer_norm_epsilon = reader.get<double>("layer_norm_epsilon", c.layer_norm_epsilon);
  c.residual_in_fp32 = reader.get<bool>("residual_in_fp32", c.residual_in_fp32);
  c.time_step_min = reader.get<double>("time_step_min", c.time_step_min);
  c.time_step_max = reader.get<double>("time_step_max", c.time_step_max);
  c.time_step_floor = reader.get<double>("time_step_floor", c.time_step_floor);
  read_time_step_limit(reader, c);
  reader.choice("hidden_act", {"silu"}, "silu");  // the convolution's activation
  c.tie_word_embeddings = reader.get<bool>("tie_word_embeddings", c.tie_word_embeddings);
  c.pad_token_id = reader.optional<int64_t>("pad_token_id");
  c.bos_token_id = reader.get<int64_t>("bos_token_id", c.bos_token_id);
  c.eos_token_id = reader.get<int64_t>("eos_token_id", c.eos_token_id);
  reader.finish();
}

// The head and group structure: whole heads fill the mixer's width, whole groups of heads share B and C.
void check_shape(const ConfigReader& reader, const Mamba2Config& c) {
  if (c.expand * c.hidden_size != c.d_inner())
    reader.fail("num_heads", "num_heads x head_dim = " + text(c.num_heads) + " x " + text(c.head_dim) + " = " +
                                 text(c.d_inner()) + " must equal expand x hidden_size = " + text(c.expand) + " x " +
                                 text(c.hidden_size) + " = " + text(c.expand * c.hidden_size) +
                                 " (Mamba2ForCausalLM's heads split its mixer width)");
  if (c.num_heads % c.n_groups != 0)
    reader.fail("n_groups", text(c.n_groups) + " groups do not divide num_heads (" + text(c.num_heads) +
                                "): each group of heads shares one B and one C");
}

}  // namespace

Mamba2Config Mamba2Config::read(ConfigReader& reader) {
  Mamba2Config c;
  read_keys(reader, c);
  for (const auto& [key, value] : {std::pair<const char*, int64_t>{"hidden_size", c.hidden_size},
                                   {"num_hidden_layers", c.num_hidden_layers},
                                   {"vocab_size", c.vocab_size},
                                   {"num_heads", c.num_heads},
                                   {"head_dim", c.head_dim},
                                   {"state_size", c.state_size},
                                   {"n_groups", c.n_groups},
                                   {"expand", c.expand},
                                   {"conv_kernel", c.conv_kernel},
                                   {"chunk_size", c.chunk_size}})
    require_positive(reader, key, value);
  require_positive(reader, "layer_norm_epsilon", c.layer_norm_epsilon);
  require_positive(reader, "time_step_min", c.time_step_min);
  if (c.time_step_max < c.time_step_min)
    reader.fail("time_step_max", "is " + std::to_string(c.time_step_max) + ", below time_step_min (" +
                                     std::to_string(c.time_step_min) + ")");
  if (c.time_step_floor < 0.0)
    reader.fail("time_step_floor", "must not be negative, got " + std::to_string(c.time_step_floor));
  check_shape(reader, c);
  const double h = static_cast<double>(c.hidden_size);
  const double layer = h * static_cast<double>(c.projection_size()) +
                       static_cast<double>(c.conv_dim() * c.conv_kernel) + static_cast<double>(c.d_inner()) * h;
  check_parameter_count(reader, "hidden_size",
                        static_cast<double>(c.vocab_size) * h * 2.0 + static_cast<double>(c.num_hidden_layers) * layer,
                        "vocab_size, hidden_size, num_hidden_layers, num_heads, head_dim, n_groups, state_size");
  return c;
}

std::vector<double> mamba2_block_costs(const Mamba2Config& c, int64_t sequence_length) {
  const double h = static_cast<double>(c.hidden_size);
  const double multiply_adds = c.multiply_adds_per_token(sequence_length);
  std::vector<double> costs;
  costs.reserve(static_cast<size_t>(c.num_blocks()));
  costs.push_back(0.0);  // embedding lookup: no arithmetic
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) costs.push_back(2.0 * multiply_adds);
  costs.push_back(2.0 * h * static_cast<double>(c.vocab_size));  // lm_head
  return costs;
}

}  // namespace triax::mamba2
