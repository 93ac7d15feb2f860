#include "triax/generate/generator.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <utility>

#include "decode_profiler.hpp"
#include "triax/core/comm/communicator.hpp"
#include "triax/core/plugins/plugin_instances.hpp"
#include "triax/core/step/step_read_back.hpp"
#include "triax/error.hpp"
#include "triax/generate/model_cache.hpp"
#include "triax/tensor_handle.hpp"

namespace triax::generation {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The last position's logits over the whole meaningful vocabulary, [rows, vocab_size] in fp32,
// from this tp rank's shard [rows, new, padded vocab / tp].
at::Tensor whole_vocabulary(const at::Tensor& shard, Communicator& communicator, int64_t vocab_size) {
  if (!shard.defined() || shard.dim() != 3)
    throw Error("generation: the model's last stage returned no logits [rows, new tokens, vocabulary]");
  at::Tensor last = shard.select(1, shard.size(1) - 1).to(at::kFloat).contiguous();
  const int tp = communicator.size(TRIAX_GROUP_TP);
  if (tp > 1) {
    at::Tensor gathered = at::empty({tp, last.size(0), last.size(1)}, last.options());
    communicator.all_gather(TRIAX_GROUP_TP, gathered, last);
    last = gathered.permute({1, 0, 2}).reshape({last.size(0), -1});
  }
  if (last.size(1) < vocab_size)
    throw Error("generation: the model returned logits over " + std::to_string(last.size(1)) +
                " tokens, fewer than its vocabulary of " + std::to_string(vocab_size));
  return last.narrow(1, 0, vocab_size);
}

// The plugin's ordinary forward over a whole sequence, logits only: the uncached reference.
at::Tensor full_forward_logits(ModelInstance& model, const at::Tensor& ids) {
  const triax_model_ref ref = model.ref();
  triax_stage_io io{};
  io.struct_size = sizeof(io);
  io.input_ids = borrow_handle(ids);
  io.want_logits = 1;
  triax_error error{};
  const triax_status status = ref.vtable->forward(ref.model, &io, &error);
  at::Tensor logits = adopt_handle(io.logits);
  // Whatever else the plugin handed over is ours too.
  adopt_handle(io.hidden_out);
  adopt_handle(io.loss);
  adopt_handle(io.aux_loss);
  for (triax_tensor* handle : io.aux_losses) adopt_handle(handle);
  for (int32_t i = 1; i < io.boundary_out_count && i < TRIAX_MAX_BOUNDARY_TENSORS; ++i)
    adopt_handle(io.boundary_out[i]);
  if (status != TRIAX_OK) throw_plugin_failure(status, error, "model plugin '" + model.name() + "'");
  return logits;
}

at::Tensor ids_tensor(const std::vector<const std::vector<int64_t>*>& rows, const c10::Device& device) {
  const int64_t length = static_cast<int64_t>(rows.front()->size());
  at::Tensor ids = at::empty({static_cast<int64_t>(rows.size()), length}, at::TensorOptions().dtype(at::kLong));
  for (size_t r = 0; r < rows.size(); ++r)
    std::copy(rows[r]->begin(), rows[r]->end(), ids.data_ptr<int64_t>() + static_cast<int64_t>(r) * length);
  return ids.to(device);
}

void check_prompts(const std::vector<std::vector<int64_t>>& prompts, const GenerationOptions& options) {
  if (prompts.empty()) throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "generation: no prompt given");
  if (options.max_new_tokens < 1)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "generation: max new tokens must be at least 1, got " + std::to_string(options.max_new_tokens));
  if (options.vocab_size < 1) throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "generation: the vocabulary size is unknown");
  options.sampling.validate();
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (prompts[i].empty())
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "generation: prompt " + std::to_string(i) + " has no token");
    for (int64_t id : prompts[i])
      if (id < 0 || id >= options.vocab_size)
        throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "generation: prompt " + std::to_string(i) + " holds token id " +
                                                      std::to_string(id) + ", outside the model's vocabulary [0, " +
                                                      std::to_string(options.vocab_size) + ")");
  }
}

// A cache for prompt `index` and max_new_tokens more; a refusal says whether the prompt itself
// is too long for the model or only the tokens asked for after it.
ModelCache create_cache(CachedModel& model, size_t index, int64_t prompt_length, int64_t max_new_tokens) {
  try {
    return model.create_cache(prompt_length + max_new_tokens);
  } catch (const Error& refused) {
    if (refused.status() == TRIAX_ERROR_UNSUPPORTED) throw;
    const std::string prompt = "prompt " + std::to_string(index) + " has " + std::to_string(prompt_length) + " tokens";
    try {
      model.create_cache(prompt_length);
    } catch (const Error& also_refused) {
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                  prompt + ", more than the model's context holds: " + std::string(also_refused.what()));
    }
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, prompt + "; with " + std::to_string(max_new_tokens) +
                                                  " new tokens (--max-new-tokens) it no longer fits the model's "
                                                  "context: " +
                                                  std::string(refused.what()));
  }
}

// One call of generate(): the prompts' caches, the sequences so far, and the steps over them.
class GenerationLoop {
 public:
  GenerationLoop(ModelInstance& model, Communicator& communicator, const c10::Device& device,
                 const std::vector<std::vector<int64_t>>& prompts, const GenerationOptions& options)
      : model_(model),
        communicator_(communicator),
        device_(device),
        prompts_(prompts),
        options_(options),
        cached_(model),
        streams_(options.seed, static_cast<int64_t>(prompts.size())),
        agree_over_tp_(communicator.size(TRIAX_GROUP_TP) > 1) {
    // Every prompt's cache first: a prompt too long is refused before any work.
    caches_.reserve(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i)
      caches_.push_back(create_cache(cached_, i, static_cast<int64_t>(prompts[i].size()), options.max_new_tokens));
    if (!options.use_cache) caches_.clear();
    result_.sequences.resize(prompts.size());
  }

  // Prefill: prompts of equal length share a forward.
  void prefill() {
    const auto start = Clock::now();
    std::map<size_t, std::vector<int64_t>> by_length;
    for (size_t i = 0; i < rows(); ++i) {
      by_length[prompts_[i].size()].push_back(static_cast<int64_t>(i));
      result_.stats.prompt_tokens += static_cast<int64_t>(prompts_[i].size());
    }
    for (const auto& [length, row_ids] : by_length) {
      if (!options_.use_cache) {
        append(choose(uncached_logits(row_ids), row_ids).cpu(), row_ids);
        continue;
      }
      std::vector<const std::vector<int64_t>*> group;
      std::vector<ModelCache*> group_caches;
      for (int64_t row : row_ids) {
        group.push_back(&prompts_[static_cast<size_t>(row)]);
        group_caches.push_back(&caches_[static_cast<size_t>(row)]);
      }
      append(choose(cached_.forward_cached(group_caches, ids_tensor(group, device_)).logits, row_ids).cpu(), row_ids);
    }
    result_.stats.prefill_seconds = seconds_since(start);
  }

  // Decode. With the cache, every row runs every step, a finished one too (its tokens are
  // dropped): the batch keeps its shape, so the caches of the rows stay one batch in the model,
  // and a step's input is the last step's choice, never leaving the device.
  void decode() {
    const auto start = Clock::now();
    DecodeProfiler profiler(options_.profile_path, device_, options_.profile_steps);
    if (options_.use_cache)
      decode_cached(profiler);
    else
      decode_uncached(profiler);
    profiler.finish();
    result_.stats.decode_seconds = seconds_since(start);
    for (const GeneratedSequence& s : result_.sequences)
      result_.stats.new_tokens += static_cast<int64_t>(s.tokens.size());
  }

  GenerationResult& result() { return result_; }

 private:
  // The host runs one step ahead of its reading: step t + 1 is queued before step t's tokens are
  // read back, so the device works while the host waits for the copy and appends the tokens. A
  // row's end (EOS, max_new_tokens) is thus known one step late. A step is queued while a row may
  // still need its token; it is in vain only where step t's tokens were EOS for every such row,
  // and its tokens are then dropped as a finished row's are.
  void decode_cached(DecodeProfiler& profiler) {
    std::vector<int64_t> every_row;
    std::vector<ModelCache*> every_cache;
    for (size_t i = 0; i < rows(); ++i) {
      every_row.push_back(static_cast<int64_t>(i));
      every_cache.push_back(&caches_[i]);
    }
    StepReadBack in_flight(device_);
    at::Tensor next = last_tokens();
    for (int64_t step = 0; needs_another_step(in_flight.pending()); ++step) {
      profiler.before_step(step);
      const at::Tensor chosen =
          choose(cached_.forward_cached(every_cache, next, {}, options_.cuda_graphs).logits, every_row);
      if (in_flight.pending()) append(in_flight.take().host, every_row);
      in_flight.queue(step, chosen);
      next = chosen.view({-1, 1});
      profiler.after_step(step);
      ++result_.stats.decode_steps;
    }
    if (in_flight.pending()) append(in_flight.take().host, every_row);
  }

  // Without the cache each step recomputes the running rows' sequences, read from the host.
  void decode_uncached(DecodeProfiler& profiler) {
    for (int64_t step = 0; needs_another_step(false); ++step) {
      profiler.before_step(step);
      const std::vector<int64_t> running = running_rows();
      append(choose(uncached_logits(running), running).cpu(), running);
      profiler.after_step(step);
      ++result_.stats.decode_steps;
    }
  }

  size_t rows() const { return prompts_.size(); }

  bool finished(size_t row) const {
    const GeneratedSequence& s = result_.sequences[row];
    return s.stopped_at_eos || static_cast<int64_t>(s.tokens.size()) >= options_.max_new_tokens;
  }
  // Whether a row may still need a token, counting the one a step in flight brings each row not
  // yet finished (EOS in that token may end the row, which the host reads only later).
  bool needs_another_step(bool step_in_flight) const {
    const int64_t arriving = step_in_flight ? 1 : 0;
    for (size_t i = 0; i < rows(); ++i)
      if (!finished(i) && static_cast<int64_t>(result_.sequences[i].tokens.size()) + arriving < options_.max_new_tokens)
        return true;
    return false;
  }
  std::vector<int64_t> running_rows() const {
    std::vector<int64_t> running;
    for (size_t i = 0; i < rows(); ++i)
      if (!finished(i)) running.push_back(static_cast<int64_t>(i));
    return running;
  }

  // The next token of `row_ids` from their logits, chosen on the device (the same at every tp rank).
  // Sampling draws one uniform per listed row, step after step in the same order.
  at::Tensor choose(const at::Tensor& shard_logits, const std::vector<int64_t>& row_ids) {
    const at::Tensor logits = whole_vocabulary(shard_logits, communicator_, options_.vocab_size);
    std::vector<double> uniforms;
    if (!options_.sampling.greedy()) uniforms = streams_.next(row_ids);
    at::Tensor chosen = choose_tokens(logits, options_.sampling, uniforms).to(at::kLong).contiguous();
    if (agree_over_tp_) communicator_.broadcast(TRIAX_GROUP_TP, chosen, 0);
    return chosen;
  }

  // Appends a step's tokens (on the host, one per listed row) to the rows not yet finished.
  void append(const at::Tensor& host_tokens, const std::vector<int64_t>& row_ids) {
    for (size_t k = 0; k < row_ids.size(); ++k) {
      if (finished(static_cast<size_t>(row_ids[k]))) continue;
      GeneratedSequence& sequence = result_.sequences[static_cast<size_t>(row_ids[k])];
      const int64_t token = host_tokens.data_ptr<int64_t>()[k];
      sequence.tokens.push_back(token);
      sequence.stopped_at_eos = std::find(options_.eos.begin(), options_.eos.end(), token) != options_.eos.end();
    }
  }

  // The whole sequence so far of each row (its prompt and its new tokens) through the uncached
  // forward: the last position's logits.
  at::Tensor uncached_logits(const std::vector<int64_t>& row_ids) {
    std::vector<at::Tensor> logits;
    for (int64_t row : row_ids) {
      std::vector<int64_t> sequence = prompts_[static_cast<size_t>(row)];
      const auto& tokens = result_.sequences[static_cast<size_t>(row)].tokens;
      sequence.insert(sequence.end(), tokens.begin(), tokens.end());
      const at::Tensor full = full_forward_logits(model_, ids_tensor({&sequence}, device_));
      logits.push_back(full.narrow(1, full.size(1) - 1, 1));
    }
    return at::cat(logits, 0);
  }

  // Each row's latest token, [rows, 1] on the device: the first decoding step's input.
  at::Tensor last_tokens() const {
    std::vector<std::vector<int64_t>> last;
    for (const GeneratedSequence& s : result_.sequences) last.push_back({s.tokens.back()});
    std::vector<const std::vector<int64_t>*> last_rows;
    for (const auto& tokens : last) last_rows.push_back(&tokens);
    return ids_tensor(last_rows, device_);
  }

  ModelInstance& model_;
  Communicator& communicator_;
  const c10::Device device_;
  const std::vector<std::vector<int64_t>>& prompts_;
  const GenerationOptions& options_;
  CachedModel cached_;  // the model's inference cache
  std::vector<ModelCache> caches_;
  GenerationResult result_;
  SamplingStreams streams_;
  const bool agree_over_tp_;
};

}  // namespace

GenerationResult generate(ModelInstance& model, Communicator& communicator, const c10::Device& device,
                          const std::vector<std::vector<int64_t>>& prompts, const GenerationOptions& options) {
  check_prompts(prompts, options);
  at::NoGradGuard no_grad;
  GenerationLoop loop(model, communicator, device, prompts, options);
  loop.prefill();
  loop.decode();
  return std::move(loop.result());
}

}  // namespace triax::generation
