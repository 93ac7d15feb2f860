#include "triax/device/model_memory.hpp"

#include <c10/core/ScalarType.h>

#include <fstream>
#include <iomanip>
#include <sstream>

#include "triax/device/device.hpp"
#include "triax/error.hpp"
#include "triax/glob_match.hpp"
#include "triax/tensor_text.hpp"

#ifdef TRIAX_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

namespace triax {
namespace {

std::string gib(double bytes) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(1) << bytes / (1024.0 * 1024.0 * 1024.0) << " GiB";
  return text.str();
}

}  // namespace

double model_bytes_per_rank(const TrainConfig& config, double parameters) {
  const ParallelismConfig& p = config.parallelism;
  const int64_t zero = config.optimizer.zero_stage;
  const std::optional<c10::ScalarType> dtype = dtype_from_name(config.model.dtype);
  const double weight = dtype ? static_cast<double>(c10::elementSize(*dtype)) : 2.0;
  // tp and pp split the model, ep its experts (counted as if it split all of it: a lower bound),
  // ZeRO-3 every parameter over dp; context parallelism replicates it.
  const double model_split = static_cast<double>(p.tp * p.pp * (zero == 3 ? p.dp : p.expert_parallel_size));
  const double held = parameters / model_split;
  double bytes = held * 2.0 * weight;  // the parameters and their gradients
  if (ends_with(config.optimizer.plugin, "adamw")) {
    const double state = 8.0 + (weight < 4.0 ? 4.0 : 0.0);
    bytes += (zero == 1 ? parameters / static_cast<double>(p.tp * p.pp * p.dp) : held) * state;
  }
  return bytes;
}

std::optional<double> free_device_bytes(const c10::Device& device) {
#ifdef TRIAX_WITH_CUDA
  if (device.is_cuda()) {
    const c10::cuda::CUDAGuard guard(device.index());
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) return std::nullopt;
    return static_cast<double>(free);
  }
#endif
  if (!device.is_cpu()) return std::nullopt;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kib = 0.0;
  std::string unit;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024.0;
  return std::nullopt;
}

void refuse_model_beyond_free_memory(const TrainConfig& config, double parameters, const c10::Device& device) {
  const std::optional<double> free = free_device_bytes(device);
  if (!free) return;
  const double needed = model_bytes_per_rank(config, parameters);
  if (needed <= *free) return;
  std::ostringstream text;
  text << std::setprecision(3) << config.origin << ": model.model_config: the model's " << parameters
       << " parameters need at least " << gib(needed) << " on this rank (its share of the " << config.model.dtype
       << " parameters and their gradients" << (ends_with(config.optimizer.plugin, "adamw") ? " and AdamW's state" : "")
       << " over tp " << config.parallelism.tp << ", pp " << config.parallelism.pp << "), more than the " << gib(*free)
       << " free on " << device_display_name(device) << (device.is_cpu() ? " (MemAvailable)" : "")
       << "; make the model smaller, split it over more tp/pp ranks or shard it with optimizer.zero_stage";
  throw ConfigError(text.str());
}

}  // namespace triax
