#include "mamba_scan_peer_times.hpp"

#include <torch/csrc/jit/serialization/pickle.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace triax::mamba::bench {
namespace {

void save_tensors(const std::map<std::string, at::Tensor>& tensors, const std::filesystem::path& path) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, tensor] : tensors) dict.insert(name, tensor.cpu());
  const std::vector<char> bytes = torch::jit::pickle_save(c10::IValue(dict));
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The script's output, echoed; its last line that opens a JSON object.
std::optional<nlohmann::json> run_script(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return std::nullopt;
  std::string line, last_json;
  std::array<char, 4096> chunk{};
  while (std::fgets(chunk.data(), chunk.size(), pipe)) {
    line += chunk.data();
    if (line.empty() || line.back() != '\n') continue;
    if (line.front() == '{') last_json = line;
    else std::fputs(("  peer: " + line).c_str(), stdout);
    line.clear();
  }
  const int status = pclose(pipe);
  if (status != 0 || last_json.empty()) {
    std::printf("  peer: `%s` failed (status %d)\n", command.c_str(), status);
    return std::nullopt;
  }
  return nlohmann::json::parse(last_json, nullptr, false);
}

}  // namespace

std::optional<PeerScanTimes> time_peer_scan(const std::string& script,
                                            const std::map<std::string, at::Tensor>& tensors) {
  const auto path = std::filesystem::temp_directory_path() / ("mamba_scan_peer_" + std::to_string(getpid()) + ".pt");
  save_tensors(tensors, path);
  const auto json = run_script("python3 " + script + " " + path.string() + " 2>&1");
  std::filesystem::remove(path);
  if (!json || json->is_discarded()) return std::nullopt;
  return PeerScanTimes{json->value("peer", std::string("peer")), json->value("forward_ms", 0.0),
                       json->value("forward_training_ms", 0.0), json->value("backward_ms", 0.0)};
}

}  // namespace triax::mamba::bench
