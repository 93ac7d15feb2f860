#include "triax/data/batch_prefetcher.hpp"

#include <chrono>

namespace triax::data {

BatchPrefetcher::BatchPrefetcher(Build build, int64_t last_step)
    : build_(std::move(build)), last_step_(last_step), worker_([this] { run(); }) {}

BatchPrefetcher::~BatchPrefetcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

void BatchPrefetcher::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return stop_ || (wanted_ != 0 && wanted_ != built_); });
    if (stop_) return;
    const int64_t step = wanted_;
    busy_ = true;
    lock.unlock();
    at::Tensor batch;
    std::exception_ptr error;
    try {
      batch = build_(step);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    busy_ = false;
    built_ = step;
    batch_ = std::move(batch);
    error_ = error;
    changed_.notify_all();
  }
}

at::Tensor BatchPrefetcher::get(int64_t step) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  if (built_ != step && wanted_ != step) {
    changed_.wait(lock, [&] { return !busy_; });  // let a build of another step finish first
    wanted_ = step;
    changed_.notify_all();
  }
  changed_.wait(lock, [&] { return built_ == step && !busy_; });
  waited_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (error_) {
    std::exception_ptr error = error_;
    error_ = nullptr;
    built_ = 0;
    wanted_ = 0;
    std::rethrow_exception(error);
  }
  at::Tensor batch = std::move(batch_);
  built_ = 0;
  wanted_ = 0;
  if (step < last_step_) {
    wanted_ = step + 1;
    changed_.notify_all();
  }
  return batch;
}

}  // namespace triax::data
