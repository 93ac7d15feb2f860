// The bytes of CPU tensor storage alive, counted while an instance exists: it stands in for the
// CPU allocator, so a test can see what a forward leaves behind for its backward (the saved
// activations) as the difference of two readings.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace triax::test {

class CpuLiveBytes final : public at::Allocator {
 public:
  CpuLiveBytes() : base_(c10::GetCPUAllocator()) { c10::SetCPUAllocator(this, kPriority); }
  ~CpuLiveBytes() override { c10::SetCPUAllocator(base_, kPriority); }
  CpuLiveBytes(const CpuLiveBytes&) = delete;
  CpuLiveBytes& operator=(const CpuLiveBytes&) = delete;

  // Bytes allocated through any instance and not yet freed.
  int64_t bytes() const {
    std::lock_guard<std::mutex> lock(blocks().mutex);
    return blocks().live;
  }

  at::DataPtr allocate(size_t n) override {
    at::DataPtr inner = base_->allocate(n);
    if (n == 0) return inner;
    void* data = inner.get();
    const at::Device device = inner.device();
    Blocks& all = blocks();
    std::lock_guard<std::mutex> lock(all.mutex);
    all.live += static_cast<int64_t>(n);
    all.by_address.emplace(data, Block{std::move(inner), static_cast<int64_t>(n)});
    // Data and context the same pointer: some kernels allocate raw memory through this allocator.
    return {data, data, &release, device};
  }
  at::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

 private:
  static constexpr uint8_t kPriority = 100;  // above the default allocator's registration
  struct Block {
    at::DataPtr inner;
    int64_t bytes;
  };
  // Shared by every instance and never destroyed: a tensor may outlive the instance that gave it.
  struct Blocks {
    std::mutex mutex;
    std::unordered_map<void*, Block> by_address;
    int64_t live = 0;
  };
  static Blocks& blocks() {
    static Blocks* all = new Blocks;
    return *all;
  }
  static void release(void* data) {
    at::DataPtr inner;  // freed after the lock is released, through the allocator that gave it
    Blocks& all = blocks();
    std::lock_guard<std::mutex> lock(all.mutex);
    auto found = all.by_address.find(data);
    if (found == all.by_address.end()) return;
    all.live -= found->second.bytes;
    inner = std::move(found->second.inner);
    all.by_address.erase(found);
  }

  at::Allocator* base_;
};

}  // namespace triax::test
