// How many of the named LibTorch ops `work` dispatches on this thread: a test's check that a fused
// kernel ran instead of the composition it replaces.
#pragma once

#include <ATen/record_function.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

inline int64_t count_dispatched_ops(const std::function<void()>& work, const std::vector<std::string>& names) {
  thread_local int64_t count = 0;
  thread_local const std::vector<std::string>* counted = nullptr;
  count = 0;
  counted = &names;
  auto callback = at::addThreadLocalCallback(
      at::RecordFunctionCallback([](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
        const std::string name = fn.name();
        for (const std::string& wanted : *counted)
          if (name == wanted) ++count;
        return nullptr;
      }).scopes({at::RecordScope::FUNCTION}));
  work();
  at::removeCallback(callback);
  counted = nullptr;
  return count;
}
