#include "triax/core/device.hpp"

#include <ATen/Context.h>
#ifdef TRIAX_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include <algorithm>

#include "triax/core/comm/launch_environment.hpp"
#include "triax/error.hpp"

namespace triax {

c10::Device resolve_device(const std::string& requested) {
  if (requested == "cpu") return c10::Device(c10::kCPU);
#ifdef TRIAX_WITH_CUDA
  // One GPU per local rank of a multi-process launch (torchrun's LOCAL_RANK, Open MPI's, Slurm's).
  if (requested == "cuda" || (requested == "auto" && at::hasCUDA()))
    return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(LaunchEnvironment::from_process().local_rank %
                                                                 std::max<int64_t>(1, at::cuda::device_count())));
#else
  if (requested == "cuda")
    throw ConfigError(
        "general.device: 'cuda' requested, but this triax build has no CUDA support "
        "(configure with -DTRIAX_CUDA=ON)");
#endif
  return c10::Device(c10::kCPU);
}

std::string device_display_name(const c10::Device& device) {
#ifdef TRIAX_WITH_CUDA
  if (device.is_cuda()) return at::cuda::getDeviceProperties(device.index())->name;
#endif
  return device.str();
}

}  // namespace triax
