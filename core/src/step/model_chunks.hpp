// This pipeline rank's model: one model instance per chunk the engine asked for
// (triax_engine_vtable.model_chunks; one unless it interleaves). Chunk c of pipeline rank r holds
// virtual stage virtual_stage_of(placement, pp, r, c) of the model's blocks (c * pp + r when
// interleaved). Their parameters form one list, chunk after chunk, which gradients, optimizer,
// tied sums and checkpoints all use; whole-model questions (FLOPs, parameter count, resolved
// config) go to chunk 0, whose answer covers the whole model.
//
// Two chunks of one rank may hold copies of one tied parameter (the V placement puts the first
// and the last virtual stage, embedding and head, on rank 0): the later copy then shares the
// first one's storage and stays out of the list, as one parameter does at pp 1, and its gradient
// joins the first copy's after each backward through its chunk (fold_tied_copies).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "triax/abi.h"
#include "triax/core/plugins/plugin_instances.hpp"
#include "step/pipeline_blocks.hpp"

namespace triax {

// The model chunks per pipeline rank that `engine` asks for; refused when
// parallelism.pp_chunks_per_rank asks for several and the engine runs another count.
int model_chunk_count(const EngineInstance& engine, int64_t pp_chunks_per_rank);

class ModelChunks {
 public:
  // `rank_context` says where this rank sits (block ranges and chunk fields are filled per chunk);
  // `virtual_stages` are pp x chunk_count block runs in virtual stage order (partition_virtual_stages).
  ModelChunks(const triax_model_vtable& vtable, const std::string& plugin, const std::string& model_yaml,
              const triax_model_context& rank_context, const std::vector<StageBlocks>& virtual_stages,
              triax_chunk_placement placement = TRIAX_CHUNKS_INTERLEAVED);

  int chunk_count() const { return static_cast<int>(chunks_.size()); }
  ModelInstance& chunk(int c) { return *chunks_.at(static_cast<size_t>(c)); }
  // Every chunk's, in chunk order: what the step request carries.
  const std::vector<triax_model_ref>& refs() const { return refs_; }

  // Every chunk's parameters, chunk after chunk; chunk c's are [range(c).first, range(c).second).
  const std::vector<NamedParameter>& parameters() const { return parameters_; }
  std::pair<size_t, size_t> parameter_range(int chunk) const;
  // Of each parameter: the chunk that holds it.
  std::vector<int> parameter_chunks() const;
  // After a backward through `chunk`: the gradients of its copies of parameters tied to an
  // earlier chunk of this rank added into those parameters' gradients.
  void fold_tied_copies(int chunk);

  // Whole-model answers (chunk 0's).
  double flops_per_token(int64_t sequence_length) const { return chunks_.front()->flops_per_token(sequence_length); }
  int64_t total_parameters() const { return chunks_.front()->total_parameters(); }
  std::string resolved_config() const { return chunks_.front()->resolved_config(); }
  std::vector<std::string> aux_loss_names() const { return chunks_.front()->aux_loss_names(); }
  void set_training(bool training);
  // QK-clip (ABI 1.12): every chunk tracks its attention logits; the factors by parameters() index.
  void track_attention_logits(bool enable);
  std::vector<std::pair<int64_t, at::Tensor>> qk_clip_factors(double threshold);

 private:
  struct TiedCopy {
    at::Tensor copy;  // a later chunk's copy, sharing the storage of parameters_[holder]
    size_t holder = 0;
    int chunk = 0;
  };
  void share_tied_copy(const NamedParameter& copy, size_t holder, int chunk, const std::string& plugin);

  std::vector<std::unique_ptr<ModelInstance>> chunks_;
  std::vector<triax_model_ref> refs_;
  std::vector<NamedParameter> parameters_;
  std::vector<size_t> chunk_starts_;  // of each chunk, its first parameter; then the total
  std::vector<TiedCopy> tied_copies_;
};

}  // namespace triax
