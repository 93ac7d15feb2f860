#include "qwen3_model.hpp"

namespace triax::qwen3 {

std::vector<double> Qwen3Model::block_costs(ConfigReader& reader, int64_t sequence_length) {
  return llama::llama_block_costs(read_qwen3_config(reader), sequence_length);
}

std::shared_ptr<Qwen3Model> Qwen3Model::create(ConfigReader& reader, const ModelContext& context) {
  return create_as<Qwen3Model>(reader, read_qwen3_config(reader), context);
}

}  // namespace triax::qwen3
