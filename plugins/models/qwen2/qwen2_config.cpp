#include "qwen2_config.hpp"

namespace triax::qwen2 {

llama::LlamaConfig read_qwen2_config(ConfigReader& reader) {
  llama::LlamaConfig c;
  c.attention_bias_on_output = false;
  c.sequence_may_exceed_max_positions = true;
  c.read_decoder_keys(reader);
  if (!reader.get<bool>("is_qwen2_config", true))
    reader.fail("is_qwen2_config", "the qwen2 model plugin needs is_qwen2_config: true (or the key left out)");
  // nanotron writes moe_config: null for a dense model; the key stays out of the resolved config when absent.
  const YAML::Node moe = reader.raw("moe_config");
  if (!moe.IsDefined())
    reader.resolved().remove("moe_config");
  else if (!moe.IsNull())
    reader.fail("moe_config", "is a mixture of experts: the moe model plugin's (model.plugin: moe, or leave "
                              "model.plugin out); the qwen2 plugin is the dense model (moe_config: null)");
  c.pretraining_tp = reader.get<int64_t>("pretraining_tp", c.pretraining_tp);
  c.read_position_keys(reader);
  reader.finish();
  c.check_sizes(reader);
  return c;
}

}  // namespace triax::qwen2
