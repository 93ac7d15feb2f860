// Programmatic dependent launch (sm_90 and later): a kernel launched with programmatic stream
// serialization may start while the kernel before it in the stream ends, up to the point where it
// waits for that kernel (wait_for_earlier_kernel: its end, and its writes visible). Before the wait
// it may only read what no earlier kernel writes (weights). let_next_kernel_start lets such a
// launch after this one start once every block of this one has called it or ended; whatever
// that launch reads before its own wait, it is safe anywhere. Without the launch attribute the wait
// returns at once and the trigger does nothing; under stream capture the graph keeps the edge.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace triax::kernels {

__device__ __forceinline__ void wait_for_earlier_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
#endif
}

__device__ __forceinline__ void let_next_kernel_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}

// One launch through cudaLaunchKernelEx, with programmatic stream serialization where asked.
class KernelLaunch {
 public:
  KernelLaunch(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream, bool programmatic) {
    attribute_.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute_.val.programmaticStreamSerializationAllowed = 1;
    config_.gridDim = grid;
    config_.blockDim = block;
    config_.dynamicSmemBytes = shared_bytes;
    config_.stream = stream;
    config_.attrs = &attribute_;  // config_ points into this object: not copied
    config_.numAttrs = programmatic ? 1 : 0;
  }
  KernelLaunch(const KernelLaunch&) = delete;
  KernelLaunch& operator=(const KernelLaunch&) = delete;

  template <typename... Parameters, typename... Arguments>
  cudaError_t operator()(void (*kernel)(Parameters...), Arguments&&... arguments) const {
    return cudaLaunchKernelEx(&config_, kernel, std::forward<Arguments>(arguments)...);
  }

 private:
  cudaLaunchAttribute attribute_ = {};
  cudaLaunchConfig_t config_ = {};
};

}  // namespace triax::kernels
