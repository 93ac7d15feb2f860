// Autoregressive generation through a model plugin's inference cache (ABI 1.3 cache_create /
// forward_cached), so it serves every model that implements the cache; the model names nothing
// here.
//
// Each sequence has its own cache. A batch of prompts of different lengths is prefilled in
// groups of equal length, then decoded together: one forward per new token for every row of the
// batch (a finished row's tokens are dropped), each row continuing its own cache at its own
// position, so no padding enters any sequence and each one's tokens equal its tokens generated
// alone. A step's tokens are chosen on the device, stay there as the next step's input, and are
// read back once the next step is queued, so the device does not wait for the host between steps.
// At tp > 1 every rank of the tp group runs the same loop on its shard; the vocabulary shards of
// the logits are gathered, and tp rank 0's choice is broadcast, so that every rank continues with
// the same tokens.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

#include "triax/generate/sampling.hpp"

namespace triax {
class Communicator;
class ModelInstance;
}  // namespace triax

namespace triax::generation {

struct GenerationOptions {
  int64_t max_new_tokens = 32;
  SamplingOptions sampling;
  uint64_t seed = 42;
  std::vector<int64_t> eos;  // a sequence stops after emitting one of these (which it keeps)
  int64_t vocab_size = 0;    // the meaningful vocabulary; logits beyond it (tp padding) are never chosen
  // false: no cache; every new token recomputes the whole sequence's forward (the reference the
  // cached path is tested against).
  bool use_cache = true;
  // The model may run each decoding step as a CUDA graph (CUDA, tp 1, a model that supports it):
  // the same tokens, one launch a step.
  bool cuda_graphs = false;
  // Non-empty: a Chrome trace of profile_steps decoding steps into this file (DecodeProfiler).
  std::string profile_path;
  int64_t profile_steps = 8;
};

struct GeneratedSequence {
  std::vector<int64_t> tokens;  // the new tokens, without the prompt
  bool stopped_at_eos = false;
};

struct GenerationStats {
  int64_t prompt_tokens = 0;
  int64_t new_tokens = 0;
  double prefill_seconds = 0.0;  // the prompts' forwards, up to each one's first new token
  double decode_seconds = 0.0;   // every later token
  // The decoding forwards run: with the cache the host learns of a row's EOS one step late, so
  // one step more than the tokens need may run where EOS ended every row before max_new_tokens.
  int64_t decode_steps = 0;
};

struct GenerationResult {
  std::vector<GeneratedSequence> sequences;  // in the prompts' order
  GenerationStats stats;
};

// Generates for every prompt (token ids, each non-empty and inside the vocabulary). A prompt
// longer than the model holds, or too long for max_new_tokens more, is an Error naming the
// prompt, its length and what the plugin says its limit is. Collective over the tp group.
GenerationResult generate(ModelInstance& model, Communicator& communicator, const c10::Device& device,
                          const std::vector<std::vector<int64_t>>& prompts, const GenerationOptions& options);

}  // namespace triax::generation
