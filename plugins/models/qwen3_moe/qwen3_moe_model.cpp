#include "qwen3_moe_model.hpp"

namespace triax::qwen3_moe {

std::vector<double> Qwen3MoeModel::block_costs(ConfigReader& reader, int64_t sequence_length) {
  const moe::MoeConfig config = read_qwen3_moe_config(reader);
  config.check_sequence_fits(reader, sequence_length);
  return moe::moe_block_costs(config, sequence_length);
}

std::shared_ptr<Qwen3MoeModel> Qwen3MoeModel::create(ConfigReader& reader, const ModelContext& context) {
  return create_as<Qwen3MoeModel>(reader, read_qwen3_moe_config(reader), context, "qwen3_moe");
}

}  // namespace triax::qwen3_moe
