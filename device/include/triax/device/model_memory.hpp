// Before any of the model is allocated: whether its parameters, their gradients and the
// optimizer's state can fit the memory this rank's device has free (on CPU the kernel's
// MemAvailable, which the ranks of a host share; on a GPU what CUDA reports free). Without the
// check, a model too large for the machine is allocated lazily on CPU and the kernel kills the
// process when the initialisation touches its pages, with no message.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <optional>

#include "triax/config/train_config.hpp"

namespace triax {

// The bytes this rank holds at least, for a model of `parameters` elements trained as `config`
// says: its share of the parameters and their gradients (the model's dtype; tp, pp and ep or
// ZeRO-3's dp split them) and of AdamW's state (two fp32 moments, and fp32 masters of
// low-precision weights; ZeRO-1 splits it over dp). Another optimizer's state is not counted.
double model_bytes_per_rank(const TrainConfig& config, double parameters);

// The bytes `device` has free now; nullopt where that cannot be read.
std::optional<double> free_device_bytes(const c10::Device& device);

// Refuses, with a ConfigError naming the numbers (exit 2), a model of `parameters` elements whose
// model_bytes_per_rank exceed free_device_bytes; a device whose free memory cannot be read is not
// checked.
void refuse_model_beyond_free_memory(const TrainConfig& config, double parameters, const c10::Device& device);

}  // namespace triax
