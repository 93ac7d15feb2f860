// The ops one decoding step of the Llama plugin runs per layer, counted on CPU by a RecordFunction
// callback: on a GPU each is a kernel launch, and at batch 1 the launches, not the weight reads,
// set a step's time. Counted are the innermost ops that compute (views, reshapes that stay views,
// allocations and no-op conversions are not), and each fused op of fused_ops.hpp and
// rotary_qkv.hpp as one, whatever its CPU composition runs. The difference between a 4-layer and
// a 2-layer model gives the count per layer; the table is printed and the count held at or below
// today's, so that a change that adds a kernel to every layer shows here.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>

#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cache_test_support.hpp"
#include "llama_model.hpp"
#include "llama_test_support.hpp"

namespace {

using namespace cache_test;
using OpCounts = std::map<std::string, int64_t>;

// Ops that launch nothing: views, metadata, allocations, conversions to what the tensor already is.
bool launches_nothing(const std::string& name) {
  static const std::set<std::string> names{
      "aten::view",     "aten::_unsafe_view", "aten::reshape",      "aten::_reshape_alias", "aten::transpose",
      "aten::t",        "aten::narrow",       "aten::slice",        "aten::select",         "aten::expand",
      "aten::expand_as", "aten::unsqueeze",   "aten::squeeze",      "aten::permute",        "aten::split_with_sizes",
      "aten::split",    "aten::unflatten",    "aten::flatten",      "aten::as_strided",     "aten::alias",
      "aten::detach",   "aten::empty",        "aten::empty_strided", "aten::empty_like",    "aten::contiguous",
      "aten::to",       "aten::lift_fresh",   "aten::resize_",      "aten::result_type",    "aten::view_as",
      "aten::resolve_conj", "aten::resolve_neg"};
  return names.count(name) > 0;
}

bool is_fused_op(const std::string& name) { return name.rfind("triax::", 0) == 0; }

struct Frame {
  std::string name;
  bool inner_counted = false;
};

thread_local std::vector<Frame> frames;
thread_local int fused_depth = 0;
thread_local OpCounts* counts = nullptr;

void leave(const std::string& name) {
  const Frame frame = frames.back();
  frames.pop_back();
  if (is_fused_op(name)) --fused_depth;
  if (fused_depth > 0) return;  // inside a fused op: its composition
  const bool counted = is_fused_op(name) || (!frame.inner_counted && !launches_nothing(name));
  if (counted) ++(*counts)[name];
  if ((counted || frame.inner_counted) && !frames.empty()) frames.back().inner_counted = true;
}

OpCounts count_ops(const std::function<void()>& work) {
  OpCounts result;
  counts = &result;
  frames.clear();
  fused_depth = 0;
  auto callback = at::addThreadLocalCallback(
      at::RecordFunctionCallback(
          [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
            const std::string name = fn.name();
            frames.push_back({name});
            if (is_fused_op(name)) ++fused_depth;
            return nullptr;
          },
          [](const at::RecordFunction& fn, at::ObserverContext*) { leave(fn.name()); })
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::USER_SCOPE}));
  work();
  at::removeCallback(callback);
  counts = nullptr;
  return result;
}

// SmolLM's shape in small: 4 query heads over 2 key/value heads, head_dim 8.
std::shared_ptr<triax::llama::LlamaModel> build_model(int64_t layers) {
  triax::ModelContext context = llama_test::make_context(layers, at::kFloat);
  context.seed = 7;
  return llama_test::build(
      llama_test::llama_yaml(/*hidden=*/32, /*intermediate=*/48, layers, /*vocab=*/30, /*tied=*/true), context);
}

// The ops of the third decoding step after a prompt of 5 tokens, `rows` rows.
OpCounts decode_step_ops(int64_t layers, int64_t rows) {
  auto model = build_model(layers);
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(3);
  const at::Tensor ids = at::randint(30, {rows, 8}, generator, at::kLong);
  auto caches = make_caches(*model, rows, 16);
  at::NoGradGuard no_grad;
  cached_logits(*model, pointers(caches), ids.narrow(1, 0, 5));
  for (int64_t t = 5; t < 7; ++t) cached_logits(*model, pointers(caches), ids.narrow(1, t, 1));
  return count_ops([&] { cached_logits(*model, pointers(caches), ids.narrow(1, 7, 1)); });
}

int64_t total(const OpCounts& counts) {
  int64_t sum = 0;
  for (const auto& [name, count] : counts) sum += count;
  return sum;
}

// Ops per layer: those the 4-layer step runs beyond the 2-layer one, halved.
OpCounts per_layer(int64_t rows) {
  const OpCounts two = decode_step_ops(2, rows), four = decode_step_ops(4, rows);
  OpCounts out;
  for (const auto& [name, count] : four) {
    const int64_t extra = count - (two.count(name) ? two.at(name) : 0);
    if (extra != 0) out[name] = extra / 2;
  }
  return out;
}

// Today's count: the input norm (with the add of the last layer's MLP output), the q/k/v
// projection, rotary_qkv_into_cache (three launches on CUDA), attention, the output projection,
// the post-attention add and norm, the gate/up projection with SwiGLU (decode_gate_up_swiglu) and
// the down projection. Before the decode work a layer also ran a clamp, two index_selects, two
// scatter_s, the mask's conversion and the residual add, and SwiGLU on its own.
constexpr int64_t kOpsPerLayer = 8;

TEST(DecodeOpCount, PerLayerHeldAtTodaysCount) {
  for (const int64_t rows : {1, 2}) {
    const OpCounts layer = per_layer(rows);
    std::cout << "decoding step, " << rows << " row(s), ops per layer: " << total(layer) << "\n";
    for (const auto& [name, count] : layer) std::cout << "  " << name << ": " << count << "\n";
    EXPECT_LE(total(layer), kOpsPerLayer) << rows << " row(s)";
    EXPECT_EQ(layer.count("aten::index_select"), 0u) << "the rotary tables' rows are read by the kernel";
    EXPECT_EQ(layer.count("aten::scatter_"), 0u) << "keys and values are written by the rotary kernel";
    EXPECT_EQ(layer.count("aten::where"), 0u) << "the attention mask is built once a step";
    EXPECT_EQ(layer.count("aten::add"), 0u) << "the residual adds are done by the norms";
    EXPECT_EQ(layer.count("triax::swiglu_halves"), 0u) << "SwiGLU is written by the gate/up product";
  }
}

}  // namespace
