#include "triax/cuda_step_graph.hpp"

#ifdef TRIAX_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#endif

#include "triax/error.hpp"

namespace triax {

#ifdef TRIAX_WITH_CUDA

namespace {

int64_t allocator_reserved_bytes(c10::DeviceIndex device) {
  return c10::cuda::CUDACachingAllocator::getDeviceStats(device)
      .reserved_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
      .current;
}

}  // namespace

struct CudaStepGraph::Impl {
  c10::DeviceIndex device = 0;
  at::cuda::CUDAGraph graph;
};

CudaStepGraph::CudaStepGraph(const c10::Device& device) : impl_(std::make_unique<Impl>()) {
  if (!device.is_cuda()) throw Error("CUDA graphs need a CUDA device, not " + device.str());
  impl_->device = device.has_index() ? device.index() : c10::cuda::current_device();
}

CudaStepGraph::~CudaStepGraph() = default;

void CudaStepGraph::capture(const std::function<void()>& work) {
  if (captured_) throw Error("a CUDA graph is captured once");
  const c10::cuda::CUDAGuard device_guard(impl_->device);
  // What is queued so far (the previous step, this step's input copy) finishes first: the capture
  // runs nothing, and the replay below follows it on the current stream.
  at::cuda::getCurrentCUDAStream(impl_->device).synchronize();
  // The ordinary pool's cached blocks (the previous step's activations) would stay reserved beside
  // the graph's own pool, which takes the activations from now on.
  c10::cuda::CUDACachingAllocator::emptyCache();
  const at::cuda::CUDAStream current = at::cuda::getCurrentCUDAStream(impl_->device);
  const int64_t reserved_before = allocator_reserved_bytes(impl_->device);
  {
    // Capture cannot run on the default stream. Thread-local mode: only this thread's unsafe CUDA
    // calls end the capture, not those of the data loader's thread (pinned host allocations for the
    // next step) or of NCCL's watchdog; the autograd thread's kernels still go into the graph,
    // since capture follows the stream they are launched on.
    const c10::cuda::CUDAStreamGuard side(at::cuda::getStreamFromPool(false, impl_->device));
    impl_->graph.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
    try {
      work();
    } catch (...) {
      try {
        impl_->graph.capture_end();
      } catch (...) {
        // The failed work invalidated the capture; its own error says why.
      }
      throw;
    }
    impl_->graph.capture_end();
  }
  reserved_bytes_ = allocator_reserved_bytes(impl_->device);
  pool_bytes_ = reserved_bytes_ - reserved_before;
  captured_ = true;
  const c10::cuda::CUDAStreamGuard back(current);
  replay();
}

void CudaStepGraph::replay() {
  if (!captured_) throw Error("a CUDA graph replayed before its capture");
  const c10::cuda::CUDAGuard device_guard(impl_->device);
  impl_->graph.replay();
}

#else

struct CudaStepGraph::Impl {};

CudaStepGraph::CudaStepGraph(const c10::Device&) {
  throw Error("CUDA graphs need a build with CUDA (TRIAX_CUDA=ON); this build has none");
}

CudaStepGraph::~CudaStepGraph() = default;

void CudaStepGraph::capture(const std::function<void()>&) {}

void CudaStepGraph::replay() {}

#endif

}  // namespace triax
