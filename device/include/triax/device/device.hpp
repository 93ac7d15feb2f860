// The device a process computes on, as general.device (or `triax generate --device`) names it.
#pragma once

#include <c10/core/Device.h>

#include <string>

namespace triax {

// "cpu", "cuda" or "auto" (the GPU when there is one). On CUDA, the GPU of index `gpu_index`
// (the launcher's local rank: one GPU per process of a host) modulo the GPUs present. "cuda" in a
// build without CUDA is a ConfigError naming general.device.
c10::Device resolve_device(const std::string& requested, int gpu_index);

// "cpu", or the GPU's product name ("NVIDIA H200"), which also selects the MFU peak.
std::string device_display_name(const c10::Device& device);

}  // namespace triax
