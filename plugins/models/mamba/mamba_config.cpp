#include "mamba_config.hpp"

#include <triax/config_checks.hpp>

namespace triax::mamba {
namespace {

// dt_rank: "auto" or a positive integer.
std::optional<int64_t> read_dt_rank(ConfigReader& ssm) {
  if (!ssm.contains("dt_rank")) {
    ssm.ignore("dt_rank");
    ssm.resolved()["dt_rank"] = "auto";
    return std::nullopt;
  }
  const YAML::Node value = ssm.raw("dt_rank");
  if (value.IsScalar() && value.Scalar() == "auto") return std::nullopt;
  int64_t rank = 0;
  try {
    rank = value.as<int64_t>();
  } catch (const YAML::Exception&) {
    ssm.fail("dt_rank", "expected \"auto\" or a positive integer, got '" + (value.IsScalar() ? value.Scalar() : "a collection") + "'");
  }
  require_positive(ssm, "dt_rank", rank);
  return rank;
}

SsmConfig read_ssm(ConfigReader& ssm) {
  SsmConfig s;
  s.d_state = ssm.get<int64_t>("d_state", s.d_state);
  s.d_conv = ssm.get<int64_t>("d_conv", s.d_conv);
  s.expand = ssm.get<int64_t>("expand", s.expand);
  s.dt_rank = read_dt_rank(ssm);
  s.dt_min = ssm.get<double>("dt_min", s.dt_min);
  s.dt_max = ssm.get<double>("dt_max", s.dt_max);
  s.dt_init = ssm.choice("dt_init", {"random", "constant"}, s.dt_init);
  s.dt_scale = ssm.get<double>("dt_scale", s.dt_scale);
  s.dt_init_floor = ssm.get<double>("dt_init_floor", s.dt_init_floor);
  s.conv_bias = ssm.get<bool>("conv_bias", s.conv_bias);
  s.bias = ssm.get<bool>("bias", s.bias);
  s.recompute_conv = ssm.get<bool>("recompute_conv", s.recompute_conv);
  ssm.get<bool>("use_fast_path", true);  // mamba-ssm's kernel choice: triax picks its kernels by device
  ssm.finish();
  require_positive(ssm, "d_state", s.d_state);
  require_positive(ssm, "d_conv", s.d_conv);
  require_positive(ssm, "expand", s.expand);
  require_positive(ssm, "dt_min", s.dt_min);
  require_positive(ssm, "dt_max", s.dt_max);
  require_positive(ssm, "dt_scale", s.dt_scale);
  if (s.dt_max < s.dt_min)
    ssm.fail("dt_max", "is " + std::to_string(s.dt_max) + ", below dt_min (" + std::to_string(s.dt_min) + ")");
  if (s.dt_init_floor < 0.0)
    ssm.fail("dt_init_floor", "must not be negative, got " + std::to_string(s.dt_init_floor));
  return s;
}

}  // namespace

MambaConfig MambaConfig::read(ConfigReader& reader) {
  MambaConfig c;
  if (!reader.get<bool>("is_mamba_config", true))
    reader.fail("is_mamba_config", "the mamba model plugin needs is_mamba_config: true (or the key left out)");
  c.d_model = reader.get<int64_t>("d_model", c.d_model);
  c.num_hidden_layers = reader.get<int64_t>("num_hidden_layers", c.num_hidden_layers);
  c.vocab_size = reader.get<int64_t>("vocab_size", c.vocab_size);
  if (std::optional<ConfigReader> ssm = reader.optional_section("ssm_cfg")) {
    c.ssm = read_ssm(*ssm);
  } else {  // absent or null: every default, recorded
    ConfigReader defaults(YAML::Node(YAML::NodeType::Map), reader.key_path("ssm_cfg"), reader.origin());
    c.ssm = read_ssm(defaults);
    reader.resolved()["ssm_cfg"] = defaults.resolved();
  }
  if (!reader.get<bool>("rms_norm", true))
    reader.fail("rms_norm", "false (LayerNorm) is not implemented: Hugging Face's MambaForCausalLM uses RMSNorm");
  reader.get<bool>("fused_add_norm", true);  // a kernel choice of mamba-ssm; the arithmetic is the same
  c.residual_in_fp32 = reader.get<bool>("residual_in_fp32", c.residual_in_fp32);
  c.pad_vocab_size_multiple = reader.get<int64_t>("pad_vocab_size_multiple", c.pad_vocab_size_multiple);
  reader.get<std::string>("dtype", "float32");  // nanotron's copy of model.dtype, which triax reads
  c.rms_norm_eps = reader.get<double>("rms_norm_eps", c.rms_norm_eps);
  c.pad_token_id = reader.optional<int64_t>("pad_token_id");
  c.bos_token_id = reader.get<int64_t>("bos_token_id", c.bos_token_id);
  c.eos_token_id = reader.get<int64_t>("eos_token_id", c.eos_token_id);
  c.tie_word_embeddings = reader.get<bool>("tie_word_embeddings", c.tie_word_embeddings);
  reader.finish();

  require_positive(reader, "d_model", c.d_model);
  require_positive(reader, "num_hidden_layers", c.num_hidden_layers);
  require_positive(reader, "vocab_size", c.vocab_size);
  require_positive(reader, "pad_vocab_size_multiple", c.pad_vocab_size_multiple);
  require_positive(reader, "rms_norm_eps", c.rms_norm_eps);
  const double h = static_cast<double>(c.d_model), d = static_cast<double>(c.ssm.expand) * h;
  const double layer = h * 3.0 * d + d * static_cast<double>(c.ssm.d_conv) +
                       d * (2.0 * static_cast<double>(c.dt_rank()) + 3.0 * static_cast<double>(c.ssm.d_state));
  check_parameter_count(reader, "d_model",
                        static_cast<double>(c.vocab_size) * h * 2.0 + static_cast<double>(c.num_hidden_layers) * layer,
                        "vocab_size, d_model, num_hidden_layers, ssm_cfg.expand, ssm_cfg.d_state, ssm_cfg.dt_rank");
  return c;
}

std::vector<double> mamba_block_costs(const MambaConfig& c) {
  const double h = static_cast<double>(c.d_model);
  const double d = static_cast<double>(c.d_inner());
  const double n = static_cast<double>(c.ssm.d_state);
  const double r = static_cast<double>(c.dt_rank());
  const double k = static_cast<double>(c.ssm.d_conv);
  // in_proj, conv1d, x_proj, dt_proj, the scan (h = exp(dA) h + dB u and C.h per state element), out_proj.
  const double multiply_adds = h * 2.0 * d + d * k + d * (r + 2.0 * n) + r * d + 3.0 * d * n + d * h;
  std::vector<double> costs;
  costs.reserve(static_cast<size_t>(c.num_blocks()));
  costs.push_back(0.0);  // embedding lookup: no arithmetic
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) costs.push_back(2.0 * multiply_adds);
  costs.push_back(2.0 * h * static_cast<double>(c.model_vocab_size()));  // lm_head
  return costs;
}

}  // namespace triax::mamba
