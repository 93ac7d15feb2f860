// The peer column of mamba_scan_bench --peer: mamba-ssm's selective_scan_fn timed on the same
// tensors by tools/device/mamba_scan_peer.py, in a child process of the benchmark.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <optional>
#include <string>

namespace triax::mamba::bench {

struct PeerScanTimes {
  std::string peer;  // "mamba-ssm <version>"
  double forward_ms = 0, forward_training_ms = 0, backward_ms = 0;
};

// Saves `tensors` (u, delta, z, B, C, A, D, delta_bias, grad_y) where torch.load reads them, runs
// `python3 script FILE`, and reads its JSON line; nullopt (after printing why) when the script
// fails, e.g. without mamba-ssm installed.
std::optional<PeerScanTimes> time_peer_scan(const std::string& script, const std::map<std::string, at::Tensor>& tensors);

}  // namespace triax::mamba::bench
