// What the engine tests over real ranks share (interleaved_pipeline_test, zero_bubble_pipeline_test):
// the toy micro-batches, their source, a toy model's context and the host's backward hooks.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "triax/abi.h"
#include "triax/core/plugins/plugin_instances.hpp"
#include "triax/engine.hpp"
#include "triax/model.hpp"
#include "triax/tensor_handle.hpp"

namespace triax::testing {

// Micro-batch i: 2 x 3 token ids, different for each i below 11.
inline at::Tensor token_ids(int micro_batch) {
  return at::arange(6, at::kLong).add(7 * micro_batch).remainder(11).view({2, 3});
}

// A triax_micro_batch_source of token_ids, inputs and labels alike.
struct Feed {
  static triax_status next(void*, int32_t index, triax_stage_io* io, triax_error*) {
    io->input_ids = release_handle(token_ids(index));
    io->label_ids = release_handle(token_ids(index));
    return TRIAX_OK;
  }
};

// A toy model's blocks [first, last) as chunk `chunk` of `chunks`, virtual stage `stage`, in fp32 on the CPU.
inline triax_model_context toy_context(int pp_rank, int pp_size, int first, int last, int chunk, int chunks, int stage,
                                       const triax_host* host) {
  triax_model_context context{};
  context.struct_size = sizeof(context);
  context.tp_size = context.dp_size = 1;
  context.pp_rank = pp_rank;
  context.pp_size = pp_size;
  context.first_block = first;
  context.last_block = last;
  context.device = "cpu";
  context.dtype = "float32";
  context.host = host;
  context.chunk_index = chunk;
  context.chunk_count = chunks;
  context.virtual_stage = stage;
  context.virtual_stage_count = chunks * pp_size;
  return context;
}

// The same with the chunks interleaved: virtual stage chunk x pp_size + pp_rank.
inline triax_model_context toy_context(int pp_rank, int pp_size, int first, int last, int chunk, int chunks,
                                       const triax_host* host) {
  return toy_context(pp_rank, pp_size, first, last, chunk, chunks, chunk * pp_size + pp_rank, host);
}

// The host's after_chunk_backward, recording each (chunk, micro-batch) as called.
struct Hooks {
  std::vector<std::pair<int, int>> backwards;
  static triax_status after_chunk_backward(void* self, int32_t chunk, int32_t index, triax_error*) {
    static_cast<Hooks*>(self)->backwards.emplace_back(chunk, index);
    return TRIAX_OK;
  }
};

// What a toy model plugin class M needs besides its blocks: `blocks` blocks of equal cost, no
// model_config, no FLOPs to report.
template <class M, int blocks>
class ToyModel : public Model {
 public:
  static std::vector<double> block_costs(ConfigReader& config, int64_t) {
    config.finish();
    return std::vector<double>(blocks, 1.0);
  }
  static std::shared_ptr<M> create(ConfigReader& config, const ModelContext& context) {
    config.finish();
    return std::make_shared<M>(context);
  }
  double flops_per_token(int64_t) const override { return 0; }
  std::string resolved_config() const override { return "{}"; }
};

// The mean loss of `micro_batches` micro-batches through the whole model in this process, and
// its gradients by parameter name.
struct WholeModelRun {
  at::Tensor loss;
  std::map<std::string, at::Tensor> gradients;
};

inline WholeModelRun run_whole_model(ModelInstance& whole, int micro_batches) {
  WholeModelRun run{at::zeros({}, at::kFloat), {}};
  for (int i = 0; i < micro_batches; ++i) {
    StageInput input;  // micro-batch i as the whole model takes it: its tokens, as labels too
    input.input_ids = token_ids(i);
    input.label_ids = token_ids(i);
    StageOutput out = ModelRef(whole.ref()).forward(input);
    (out.loss / micro_batches).backward();
    run.loss += out.loss.detach() / micro_batches;
  }
  for (const NamedParameter& p : whole.parameters()) run.gradients[p.name] = p.tensor.grad();
  return run;
}

// A step of `micro_batches` over this rank's chunks `refs`, fed by Feed, its hooks recorded.
inline triax_step_request chunk_step_request(const std::vector<triax_model_ref>& refs, int micro_batches,
                                             Hooks& hooks) {
  triax_step_request request{};
  request.struct_size = sizeof(request);
  request.model = refs.front();
  request.micro_batches = micro_batches;
  request.batches = {nullptr, &Feed::next};
  request.hooks_self = &hooks;
  request.model_count = static_cast<int32_t>(refs.size());
  request.models = refs.data();
  request.after_chunk_backward = &Hooks::after_chunk_backward;
  return request;
}

}  // namespace triax::testing
