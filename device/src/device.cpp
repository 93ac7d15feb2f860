#include "triax/device/device.hpp"

#include <ATen/Context.h>
#ifdef TRIAX_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include <algorithm>

#include "triax/error.hpp"

namespace triax {

c10::Device resolve_device(const std::string& requested, int gpu_index) {
  if (requested == "cpu") return c10::Device(c10::kCPU);
#ifdef TRIAX_WITH_CUDA
  if (requested == "cuda" || (requested == "auto" && at::hasCUDA()))
    return c10::Device(c10::kCUDA,
                       static_cast<c10::DeviceIndex>(gpu_index % std::max<int64_t>(1, at::cuda::device_count())));
#else
  if (requested == "cuda")
    throw ConfigError(
        "general.device: 'cuda' requested, but this triax build has no CUDA support "
        "(configure with -DTRIAX_CUDA=ON)");
  (void)gpu_index;
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
