// The bytes of CPU tensor storage alive, counted while an instance exists: it stands in for the
// CPU allocator, so a test can see what a forward leaves behind for its backward (the saved
// activations) as the difference of two readings.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstdint>
#include <memory>

namespace triax::test {

class CpuLiveBytes final : public at::Allocator {
 public:
  CpuLiveBytes() : base_(c10::GetCPUAllocator()) { c10::SetCPUAllocator(this, kPriority); }
  ~CpuLiveBytes() override { c10::SetCPUAllocator(base_, kPriority); }
  CpuLiveBytes(const CpuLiveBytes&) = delete;
  CpuLiveBytes& operator=(const CpuLiveBytes&) = delete;

  // Bytes allocated through this instance and not yet freed.
  int64_t bytes() const { return live_->load(); }

  at::DataPtr allocate(size_t n) override {
    at::DataPtr inner = base_->allocate(n);
    void* data = inner.get();
    const at::Device device = inner.device();
    live_->fetch_add(static_cast<int64_t>(n));
    // The context outlives this instance if the tensor does: it holds the counter, not `this`.
    return {data, new Block{std::move(inner), static_cast<int64_t>(n), live_}, &release, device};
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

 private:
  static constexpr uint8_t kPriority = 100;  // above the default allocator's registration
  struct Block {
    at::DataPtr inner;
    int64_t bytes;
    std::shared_ptr<std::atomic<int64_t>> live;
  };
  static void release(void* context) {
    auto* block = static_cast<Block*>(context);
    block->live->fetch_sub(block->bytes);
    delete block;  // frees through the allocator that gave the memory
  }

  at::Allocator* base_;
  std::shared_ptr<std::atomic<int64_t>> live_ = std::make_shared<std::atomic<int64_t>>(0);
};

}  // namespace triax::test
