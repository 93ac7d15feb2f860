// Throughput of safetensors and Hugging Face folder I/O on a SmolLM2-1.7B-shaped model
// (hidden 2048, 24 layers, ffn 8192, vocab 49152, tied; 1.71 B parameters, 3.4 GB in bf16),
// against plain write()+fsync and read() of the same number of bytes. Reads start with the files
// dropped from the page cache (posix_fadvise DONTNEED). Built, not run by ctest:
//
//   build/bin/safetensors_bench [FOLDER]     (default: the system temporary folder)
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "triax/convert/hf_conversion.hpp"
#include "triax/convert/hf_weights.hpp"
#include "triax/convert/model_hf_mapping.hpp"
#include "triax/interop/safetensors.hpp"

namespace fs = std::filesystem;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Drops a folder's (or file's) pages from the page cache, so that the next read comes from disk.
void evict(const fs::path& path) {
  auto one = [](const fs::path& file) {
    const int fd = ::open(file.c_str(), O_RDONLY);
    if (fd < 0) return;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  };
  if (fs::is_directory(path)) {
    for (const auto& entry : fs::directory_iterator(path)) one(entry.path());
  } else {
    one(path);
  }
}

void report(const char* what, double bytes, double seconds) {
  std::printf("%-44s %6.2f s  %6.2f GB/s\n", what, seconds, bytes / seconds / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);
  const fs::path root = fs::path(argc > 1 ? argv[1] : fs::temp_directory_path().string()) / "triax_safetensors_bench";
  fs::remove_all(root);
  fs::create_directories(root);

  triax::PluginRegistry registry;
  registry.scan_folder(TRIAX_TEST_PLUGIN_DIR);
  const std::string model_config =
      "{is_llama_config: true, hidden_size: 2048, intermediate_size: 8192, num_hidden_layers: 24, num_attention_heads: "
      "32, "
      "num_key_value_heads: 32, vocab_size: 49152, max_position_embeddings: 8192, tie_word_embeddings: true, "
      "rope_theta: 130000, rms_norm_eps: 1.0e-5}";
  std::map<std::string, at::Tensor> tensors;
  std::vector<std::pair<std::string, at::Tensor>> ordered;
  double bytes = 0;
  for (const triax::HfTensorRule& rule : triax::ModelHfMapping(registry, "llama").tensor_map(model_config)) {
    if (rule.kind == TRIAX_HF_IGNORE || rule.optional) continue;
    at::Tensor t = at::empty(rule.shape, at::kBFloat16).fill_(0.5);  // touched: no page faults in the timings
    tensors[rule.triax_name] = t;
    ordered.push_back({rule.triax_name, t});
    bytes += static_cast<double>(t.nbytes());
  }
  std::printf("%zu tensors, %.3f GB in bf16\n", tensors.size(), bytes / 1e9);

  // Baselines: the same bytes through plain system calls.
  {
    const std::string path = (root / "raw.bin").string();
    auto start = std::chrono::steady_clock::now();
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    for (const auto& [name, t] : ordered) {
      const char* p = static_cast<const char*>(t.data_ptr());
      size_t left = t.nbytes();
      while (left > 0) {
        const ssize_t n = ::write(fd, p, left);
        if (n <= 0) return 1;
        p += n;
        left -= static_cast<size_t>(n);
      }
    }
    ::fsync(fd);
    ::close(fd);
    report("baseline write()+fsync", bytes, seconds_since(start));
    at::Tensor sink = at::zeros({static_cast<int64_t>(bytes)}, at::kByte);
    evict(path);
    start = std::chrono::steady_clock::now();
    const int in = ::open(path.c_str(), O_RDONLY);
    char* out = static_cast<char*>(sink.data_ptr());
    for (ssize_t n; (n = ::read(in, out, 1 << 30)) > 0;) out += n;
    ::close(in);
    report("baseline read() from disk", bytes, seconds_since(start));
    fs::remove(path);
  }

  const std::string file = (root / "model.safetensors").string();
  auto start = std::chrono::steady_clock::now();
  triax::interop::write_safetensors(file, ordered, {{"format", "pt"}});
  report("write_safetensors (incl. fsync)", bytes, seconds_since(start));

  evict(file);
  start = std::chrono::steady_clock::now();
  {
    triax::interop::SafetensorsFile opened(file);
    for (const std::string& name : opened.names()) tensors[name] = opened.read(name);
  }
  report("SafetensorsFile read all from disk", bytes, seconds_since(start));
  fs::remove(file);

  using triax::checkpoint::read_hf_model;
  using triax::checkpoint::write_hf_model;
  start = std::chrono::steady_clock::now();
  write_hf_model(registry, "llama", model_config, tensors, at::kBFloat16, int64_t{5} << 30, (root / "hf").string());
  report("write_hf_model bf16, one file", bytes, seconds_since(start));
  evict(root / "hf");
  start = std::chrono::steady_clock::now();
  triax::checkpoint::HfModel model = read_hf_model(registry, (root / "hf").string());
  report("read_hf_model from disk", bytes, seconds_since(start));
  model.parameters.clear();
  fs::remove_all(root / "hf");

  start = std::chrono::steady_clock::now();
  write_hf_model(registry, "llama", model_config, tensors, at::kBFloat16, int64_t{1} << 30,
                 (root / "hf_sharded").string());
  report("write_hf_model bf16, 1 GB shards", bytes, seconds_since(start));
  evict(root / "hf_sharded");
  start = std::chrono::steady_clock::now();
  model = read_hf_model(registry, (root / "hf_sharded").string());
  report("read_hf_model sharded from disk", bytes, seconds_since(start));
  fs::remove_all(root);
  return 0;
}
