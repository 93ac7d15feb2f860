#include "qwen2_model.hpp"

namespace triax::qwen2 {

std::vector<double> Qwen2Model::block_costs(ConfigReader& reader, int64_t sequence_length) {
  return llama::llama_block_costs(read_qwen2_config(reader), sequence_length);
}

std::shared_ptr<Qwen2Model> Qwen2Model::create(ConfigReader& reader, const ModelContext& context) {
  return create_as<Qwen2Model>(reader, read_qwen2_config(reader), context);
}

}  // namespace triax::qwen2
