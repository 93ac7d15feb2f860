// Asynchronous 16-byte copies from global into shared memory (cp.async, sm_80 on; a plain copy
// before): the load flies while the thread computes and holds no register. A thread commits its
// copies in groups and waits for all but the newest few, so that several steps' loads are in
// flight at once; a barrier is needed only where other threads read what it copied.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace triax::kernels {

// 16 bytes from `from` (global, 16-byte aligned) to `to` (shared, 16-byte aligned).
__device__ __forceinline__ void copy16_async(void* to, const void* from) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(to));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(from) : "memory");
#else
  *static_cast<uint4*>(to) = *static_cast<const uint4*>(from);
#endif
}

// Closes the group of this thread's copies issued since the last commit (an empty group counts).
__device__ __forceinline__ void commit_async_copies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most `kPending` of this thread's newest committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void wait_async_copies_but() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

// Waits for every copy of this thread.
__device__ __forceinline__ void wait_async_copies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

}  // namespace triax::kernels
