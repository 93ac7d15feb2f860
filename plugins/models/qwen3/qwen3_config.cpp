#include "qwen3_config.hpp"

#include "qwen2_config.hpp"

namespace triax::qwen3 {

llama::LlamaConfig read_qwen3_config(ConfigReader& reader) {
  llama::LlamaConfig c;
  c.qk_norm = true;
  c.reads_head_dim = true;
  qwen2::read_dense_qwen_keys(reader, c, {"is_qwen3_config", "qwen3", "qwen3_moe"});
  return c;
}

}  // namespace triax::qwen3
