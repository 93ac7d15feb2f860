// The copy, cast, fill, add and concatenation ops a piece of LibTorch work dispatches, counted on
// this thread by a RecordFunction callback and keyed by the top-level op that called each (the op
// the caller or an autograd node entered): "aten::copy_ <- aten::to" is a cast. Each is a kernel
// launch of its own on a GPU; the layers' op-count tests (mamba_op_count_test.cpp,
// mamba2_op_count_test.cpp) pin how many one layer's step makes.
#pragma once

#include <ATen/record_function.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace ops_by_caller {

using OpCounts = std::map<std::string, int64_t>;

// The ops that launch a copy, cast, fill, add or concatenation kernel of their own, at any depth.
inline bool launches_counted_kernel(const std::string& name) {
  static const std::set<std::string> kernels{"aten::copy_", "aten::fill_", "aten::zero_",
                                             "aten::add",   "aten::add_",  "aten::cat"};
  return kernels.count(name) > 0;
}

// The autograd engine's scope around each backward node: the node's ops count as top-level ones.
inline bool is_engine_scope(const at::RecordFunction& fn) {
  return std::string(fn.name()).rfind("autograd::", 0) == 0;
}

inline std::vector<std::string>& op_stack() {
  thread_local std::vector<std::string> stack;
  return stack;
}

inline OpCounts*& counts() {
  thread_local OpCounts* current = nullptr;
  return current;
}

inline OpCounts count_ops(const std::function<void()>& work) {
  OpCounts result;
  counts() = &result;
  op_stack().clear();
  auto callback = at::addThreadLocalCallback(
      at::RecordFunctionCallback(
          [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
            if (is_engine_scope(fn)) return nullptr;
            const std::string name = fn.name();
            if (counts() && launches_counted_kernel(name))
              ++(*counts())[op_stack().empty() ? name : name + " <- " + op_stack().front()];
            op_stack().push_back(name);
            return nullptr;
          },
          [](const at::RecordFunction& fn, at::ObserverContext*) {
            if (!is_engine_scope(fn)) op_stack().pop_back();
          })
          .scopes({at::RecordScope::FUNCTION}));
  work();
  at::removeCallback(callback);
  counts() = nullptr;
  return result;
}

// Sums the counts of `kernel` called at top level or by one of `callers`. Left out: the copies
// and fills that CPU kernels make inside themselves (bf16 GEMMs, reductions, type promotion),
// which a GPU kernel does not launch.
inline int64_t total(const OpCounts& counts, const std::string& kernel, const std::vector<std::string>& callers) {
  int64_t sum = counts.count(kernel) ? counts.at(kernel) : 0;
  for (const std::string& caller : callers) {
    const auto found = counts.find(kernel + " <- " + caller);
    if (found != counts.end()) sum += found->second;
  }
  return sum;
}

}  // namespace ops_by_caller
