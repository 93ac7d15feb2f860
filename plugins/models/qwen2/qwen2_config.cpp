#include "qwen2_config.hpp"

#include <string>

namespace triax::qwen2 {

void read_dense_qwen_keys(ConfigReader& reader, llama::LlamaConfig& c, const DenseQwenNames& names) {
  c.sequence_may_exceed_max_positions = true;
  c.read_decoder_keys(reader);
  if (!reader.get<bool>(names.marker, true))
    reader.fail(names.marker, std::string("the ") + names.plugin + " model plugin needs " + names.marker +
                                  ": true (or the key left out)");
  // nanotron writes moe_config: null for a dense model; the key stays out of the resolved config when absent.
  const YAML::Node moe = reader.raw("moe_config");
  if (!moe.IsDefined())
    reader.resolved().remove("moe_config");
  else if (!moe.IsNull())
    reader.fail("moe_config", std::string("is a mixture of experts: the ") + names.moe_plugin +
                                  " model plugin's (model.plugin: " + names.moe_plugin +
                                  ", or leave model.plugin out); the " + names.plugin +
                                  " plugin is the dense model (moe_config: null)");
  c.pretraining_tp = reader.get<int64_t>("pretraining_tp", c.pretraining_tp);
  c.read_position_keys(reader);
  reader.finish();
  c.check_sizes(reader);
}

llama::LlamaConfig read_qwen2_config(ConfigReader& reader) {
  llama::LlamaConfig c;
  c.attention_bias_on_output = false;
  read_dense_qwen_keys(reader, c, {"is_qwen2_config", "qwen2", "moe"});
  return c;
}

}  // namespace triax::qwen2
