#include "triax/weight_gradient_queue.hpp"

#include <utility>

#include "triax/error.hpp"

namespace triax {

WeightGradientQueue::WeightGradientQueue() {
  queue_.self = this;
  queue_.defer = defer;
}

WeightGradientQueue::~WeightGradientQueue() { release_all(); }

void WeightGradientQueue::defer(void* self, triax_deferred_work work) {
  auto& queue = *static_cast<WeightGradientQueue*>(self);
  const std::lock_guard<std::mutex> lock(queue.mutex_);
  queue.work_.push_back(work);
}

size_t WeightGradientQueue::size() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return work_.size();
}

size_t WeightGradientQueue::run() {
  std::vector<triax_deferred_work> work;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    work.swap(work_);
  }
  for (size_t k = 0; k < work.size(); ++k) {
    triax_error error{};
    const triax_status status = work[k].run(work[k].self, &error);
    work[k].release(work[k].self);
    if (status == TRIAX_OK) continue;
    for (size_t rest = k + 1; rest < work.size(); ++rest) work[rest].release(work[rest].self);
    throw Error(status, std::string("a deferred weight gradient: ") + error.message);
  }
  return work.size();
}

void WeightGradientQueue::release_all() {
  const std::lock_guard<std::mutex> lock(mutex_);
  for (triax_deferred_work& work : work_) work.release(work.self);
  work_.clear();
}

}  // namespace triax
