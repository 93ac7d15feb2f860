#include "step/model_chunks.hpp"

#include <ATen/ATen.h>

#include <map>

#include "triax/chunk_placement.hpp"
#include "triax/error.hpp"

namespace triax {

int model_chunk_count(const EngineInstance& engine, int64_t pp_chunks_per_rank) {
  const int chunks = engine.model_chunks();
  if (pp_chunks_per_rank > 1 && chunks != pp_chunks_per_rank)
    throw ConfigError("parallelism.pp_chunks_per_rank: " + std::to_string(pp_chunks_per_rank) + ", but engine '" +
                      engine.name() + "' runs " + std::to_string(chunks) +
                      " model chunk(s) per pipeline rank; choose an engine that interleaves chunks "
                      "(parallelism.pp_engine: interleaved_1f1b) or set pp_chunks_per_rank: 1");
  return chunks;
}

ModelChunks::ModelChunks(const triax_model_vtable& vtable, const std::string& plugin, const std::string& model_yaml,
                         const triax_model_context& rank_context, const std::vector<StageBlocks>& virtual_stages,
                         triax_chunk_placement placement) {
  const int pp_size = rank_context.pp_size;
  const int count = pp_size > 0 ? static_cast<int>(virtual_stages.size()) / pp_size : 0;
  if (count < 1 || static_cast<int>(virtual_stages.size()) != count * pp_size)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, std::to_string(virtual_stages.size()) +
                                                  " virtual stages do not split into chunks of " +
                                                  std::to_string(pp_size) + " pipeline ranks");
  std::map<std::string, int> chunk_of_name;
  std::map<std::string, size_t> tied_key_holder;  // the first copy on this rank of each tied key
  for (int c = 0; c < count; ++c) {
    triax_model_context context = rank_context;
    const int stage = virtual_stage_of(placement, pp_size, rank_context.pp_rank, c);
    context.first_block = virtual_stages[static_cast<size_t>(stage)].first;
    context.last_block = virtual_stages[static_cast<size_t>(stage)].last;
    context.chunk_index = c;
    context.chunk_count = count;
    context.virtual_stage = stage;
    context.virtual_stage_count = count * pp_size;
    chunks_.push_back(std::make_unique<ModelInstance>(vtable, plugin, model_yaml, context));
    refs_.push_back(chunks_.back()->ref());
    chunk_starts_.push_back(parameters_.size());
    for (const NamedParameter& p : chunks_.back()->parameters()) {
      if (p.spec.flags & TRIAX_PARAM_TIED) {
        const auto [holder, first] = tied_key_holder.emplace(p.spec.tied_key, parameters_.size());
        if (!first) {
          share_tied_copy(p, holder->second, c, plugin);
          continue;
        }
      }
      // Checkpoints and the optimizer know a parameter by its name; tied sums by one copy per rank.
      if (!chunk_of_name.emplace(p.name, c).second)
        throw Error("model plugin '" + plugin + "': chunks " + std::to_string(chunk_of_name[p.name]) + " and " +
                    std::to_string(c) + " of pipeline rank " + std::to_string(rank_context.pp_rank) +
                    " both hold parameter '" + p.name + "'");
      parameters_.push_back(p);
    }
  }
  chunk_starts_.push_back(parameters_.size());
}

void ModelChunks::share_tied_copy(const NamedParameter& copy, size_t holder, int chunk, const std::string& plugin) {
  const at::Tensor& kept = parameters_[holder].tensor;
  if (!copy.tensor.sizes().equals(kept.sizes()) || copy.tensor.scalar_type() != kept.scalar_type())
    throw Error("model plugin '" + plugin + "': the copies of '" + copy.spec.tied_key +
                "' on two chunks of one pipeline rank differ in shape or dtype");
  copy.tensor.set_data(kept);  // one storage: the optimizer's and the checkpoint's updates reach both
  tied_copies_.push_back({copy.tensor, holder, chunk});
}

void ModelChunks::fold_tied_copies(int chunk) {
  for (TiedCopy& tied : tied_copies_) {
    if (tied.chunk != chunk || !tied.copy.grad().defined()) continue;
    at::Tensor& target = parameters_[tied.holder].tensor.mutable_grad();
    if (target.defined())
      target.add_(tied.copy.grad());
    else
      target = tied.copy.grad();
    tied.copy.mutable_grad() = at::Tensor();
  }
}

std::pair<size_t, size_t> ModelChunks::parameter_range(int chunk) const {
  if (chunk < 0 || chunk >= chunk_count())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "model chunk " + std::to_string(chunk) + " of " +
                                                  std::to_string(chunk_count()) + " on this pipeline rank");
  return {chunk_starts_[static_cast<size_t>(chunk)], chunk_starts_[static_cast<size_t>(chunk) + 1]};
}

std::vector<int> ModelChunks::parameter_chunks() const {
  std::vector<int> chunks(parameters_.size(), 0);
  for (int c = 0; c < chunk_count(); ++c) {
    const auto [first, last] = parameter_range(c);
    for (size_t k = first; k < last; ++k) chunks[k] = c;
  }
  return chunks;
}

void ModelChunks::set_training(bool training) {
  for (auto& chunk : chunks_) chunk->set_training(training);
}

void ModelChunks::track_attention_logits(bool enable) {
  for (auto& chunk : chunks_) chunk->track_attention_logits(enable);
}

std::vector<std::pair<int64_t, at::Tensor>> ModelChunks::qk_clip_factors(double threshold) {
  std::vector<std::pair<int64_t, at::Tensor>> factors;
  for (int c = 0; c < chunk_count(); ++c)
    for (auto& [index, factor] : chunks_[static_cast<size_t>(c)]->qk_clip_factors(threshold))
      factors.emplace_back(static_cast<int64_t>(chunk_starts_[static_cast<size_t>(c)]) + index, std::move(factor));
  return factors;
}

}  // namespace triax
