// The model interface plugin authors implement.
//
// A model is a torch::nn::Module split into pipeline blocks (embedding, each layer, head).
// One instance holds the blocks of its pipeline rank, builds its parameters through the SDK's
// parallel layers, and runs one stage of one micro-batch per forward() call. Communication
// between stages and ranks is the host's and the engine's business, never the model's.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "triax/abi.h"
#include "triax/config_reader.hpp"
#include "triax/host.hpp"
#include "triax/inference_cache.hpp"
#include "triax/parameter.hpp"

namespace triax {

struct Fp8Options;

enum class TpMode { AllReduce = 0, ReduceScatter = 1 };

struct ModelContext {
  int tp_rank = 0, tp_size = 1;
  int pp_rank = 0, pp_size = 1;
  int dp_rank = 0, dp_size = 1;
  // Expert parallelism inside dp (ABI 1.3): dp_rank = edp_rank * ep_size + ep_rank. The ep group
  // holds different experts, the edp group copies of the same ones.
  int ep_rank = 0, ep_size = 1;
  int edp_rank = 0, edp_size = 1;
  int first_block = 0, last_block = 0;  // this instance's blocks: [first_block, last_block)
  // This instance is model chunk chunk_index of chunk_count on its pipeline rank and holds
  // virtual stage virtual_stage of virtual_stage_count (= pp_size x chunk_count; chunk c of rank
  // r is virtual stage c x pp_size + r). One chunk: 0, 1, pp_rank, pp_size.
  int chunk_index = 0, chunk_count = 1;
  int virtual_stage = 0, virtual_stage_count = 1;
  c10::Device device = c10::Device(c10::kCPU);
  c10::ScalarType dtype = c10::kFloat;
  uint64_t seed = 42;
  YAML::Node init_method;  // model.init_method (std, path, ...)
  TpMode tp_mode = TpMode::AllReduce;
  int64_t make_vocab_size_divisible_by = 1;
  bool recompute_layer = false;  // parallelism.recompute_layer: recompute activations in backward
  int64_t recompute_layer_count = 0;  // with it, the first this many layers of the stage; 0: all
  // parallelism.tp_linear_async_communication (ABI 1.6): column-parallel layers overlap their
  // collective with their GEMMs (triax/layers/linear.hpp)
  bool tp_linear_async_communication = false;
  // parallelism.recompute_mlp_activation (ABI 1.7): the MLP's activation output is recomputed in
  // backward instead of kept (RowParallelLinear::forward_activated)
  bool recompute_mlp_activation = false;
  // parallelism.moe_layer_recompute (ABI 1.11): mixture-of-experts blocks run through recompute()
  bool recompute_moe_layers = false;
  // The config's fp8 section (ABI 1.10, triax/fp8_options.hpp), or null: the run trains without fp8.
  std::shared_ptr<const Fp8Options> fp8;
  // optimizer.zero_stage (ABI 1.10): at 3 the parameters are kept as ZeRO-3 shards
  // (triax/layers/zero3_parameters.hpp)
  int zero_stage = 0;
  // parallelism.context_parallel_attention: ring (ABI 1.11) instead of the K/V all-gather
  // (triax/layers/ring_attention.hpp); meaningful with context parallelism only
  bool cp_ring_attention = false;
  Host host;

  // vocab_size rounded up to a multiple of make_vocab_size_divisible_by x tp_size.
  int64_t padded_vocab_size(int64_t vocab_size) const {
    int64_t multiple = make_vocab_size_divisible_by * tp_size;
    return (vocab_size + multiple - 1) / multiple * multiple;
  }

  bool holds_block(int block) const { return block >= first_block && block < last_block; }
  // The first virtual stage embeds the tokens, the last computes the loss.
  bool is_first_stage() const { return virtual_stage == 0; }
  bool is_last_stage() const { return virtual_stage == virtual_stage_count - 1; }

  static ModelContext from_c(const triax_model_context& context);
};

struct StageInput {
  at::Tensor input_ids;   // [batch, seq] int64
  at::Tensor label_ids;   // [batch, seq] int64
  at::Tensor label_mask;  // [batch, seq] float or undefined (every token counts)
  at::Tensor hidden_in;   // previous stage's hidden_out; undefined on the first stage
  bool want_logits = false;  // the last stage also returns its logits (evaluation, export checks)
  // Every tensor the previous stage sent, hidden_in first; may be left empty when hidden_in is all.
  std::vector<at::Tensor> boundary_in;
  // forward_cached: the host allows a decoding step to run as a CUDA graph (ABI 1.9,
  // triax_stage_io.cuda_graph; CausalLm::captures_decode_steps).
  bool cuda_graph = false;
  // [batch, seq] int64: each token's position inside its document, restarting at 0 where a
  // document starts (model_config._use_doc_masking); given on every stage, like input_ids, or
  // undefined (positions 0..seq-1, one document per row).
  at::Tensor position_ids;
  // The engine's queue for this micro-batch's deferred weight gradients (ABI 1.13,
  // triax/layers/deferred_weight_gradients.hpp), or null: every gradient in the backward.
  const triax_weight_gradient_queue* weight_gradients = nullptr;

  // What crossed the boundary: boundary_in, or hidden_in alone.
  std::vector<at::Tensor> boundary() const;
};

struct StageOutput {
  at::Tensor hidden_out;  // every stage but the last
  at::Tensor loss;        // last stage: scalar fp32 mean cross-entropy
  at::Tensor aux_loss;    // optional auxiliary loss (already weighted), added for backward
  at::Tensor logits;      // with want_logits: [batch, seq, padded vocab / tp], this tp rank's shard
  // Named auxiliary losses of this stage (already weighted, added for backward, logged by name);
  // every name must be one of the model's aux_loss_names().
  std::map<std::string, at::Tensor> aux_losses;

  // Every tensor for the next stage, hidden_out first (at most TRIAX_MAX_BOUNDARY_TENSORS), such as a
  // residual kept in fp32 beside the hidden state; may be left empty when hidden_out is all.
  std::vector<at::Tensor> boundary_out;

  // What goes to the next stage: boundary_out, or hidden_out alone (empty on the last stage).
  std::vector<at::Tensor> boundary() const;
};

class Model : public torch::nn::Module {
 public:
  ~Model() override = default;

  virtual StageOutput forward(const StageInput& input) = 0;
  // Training FLOPs (forward + backward) per token of the whole model.
  virtual double flops_per_token(int64_t sequence_length) const = 0;
  // Parameters of the whole, unsharded model.
  virtual int64_t total_parameters() const = 0;
  // model_config with defaults filled in, as YAML text.
  virtual std::string resolved_config() const = 0;

  // Inference with a cache (triax/inference_cache.hpp). A cache for one sequence of up to
  // max_tokens tokens on this stage; by default the model has none (TRIAX_ERROR_UNSUPPORTED).
  virtual std::unique_ptr<InferenceCache> create_cache(int64_t max_tokens);
  // Forward of new tokens without gradients: row i of input.input_ids ([rows, new]) continues
  // caches[i] at positions caches[i]->length().. and extends it. A stage without the embedding
  // reads input.hidden_in; the last stage returns logits, the others hidden_out.
  virtual StageOutput forward_cached(const std::vector<InferenceCache*>& caches, const StageInput& input);
  // The names of the auxiliary losses forward() may return (StageOutput::aux_losses), the same
  // on every pipeline stage; at most TRIAX_MAX_AUX_LOSSES.
  virtual std::vector<std::string> aux_loss_names() const { return {}; }
  // QK-clip (ABI 1.12, triax/layers/grouped_query_attention.hpp): the SDK's attention layers
  // among the model's modules keep the largest logit of each query head over the training
  // forwards. A model without them refuses (TRIAX_ERROR_UNSUPPORTED).
  virtual void track_attention_logits(bool enable);
  // Per parameter_table() index holding query or key rows: the factor (broadcastable to it) that
  // brings each head above `threshold` (over the data-parallel replicas) back to it; the maxima
  // start again.
  virtual std::vector<std::pair<int64_t, at::Tensor>> qk_clip_factors(double threshold);

  // This rank's parameters with their metadata (computed once, after construction); the
  // model's initialisation may set their lr_scale (spectral muP) before the host reads them.
  std::vector<NamedParameter>& parameter_table();
  // Called once by the plugin adapter when create() has returned the initialised model, before
  // the host reads its parameters: a model may replace them there (CausalLm by their ZeRO-3
  // shards). Default: nothing.
  virtual void prepare_parameters() {}
  // aux_loss_names(), computed once (what the C adapters hand out).
  const std::vector<std::string>& aux_loss_name_table();

 private:
  std::vector<NamedParameter> table_;
  bool table_ready_ = false;
  std::vector<std::string> aux_names_;
  bool aux_names_ready_ = false;
};

}  // namespace triax
