// What the data tests share: a temporary folder, token files written as datatrove writes them,
// and the message of an error.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "error_of.hpp"

namespace triax::data::test {

namespace fs = std::filesystem;

class TempFolder {
 public:
  TempFolder() {
    static std::atomic<int> counter{0};
    path_ =
        fs::temp_directory_path() / ("triax_data_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~TempFolder() { fs::remove_all(path_); }
  fs::path operator/(const std::string& name) const { return path_ / name; }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Writes NAME.ds (+ .index and .metadata unless told not to) as datatrove does.
inline void write_token_file(const fs::path& ds, const std::vector<uint32_t>& tokens, int token_size = 2,
                             std::vector<uint64_t> doc_ends = {}, bool with_metadata = true,
                             const std::string& tokenizer = "test-tokenizer") {
  fs::create_directories(ds.parent_path());
  std::ofstream out(ds, std::ios::binary);
  for (uint32_t t : tokens) {
    if (token_size == 2) {
      const auto v = static_cast<uint16_t>(t);
      out.write(reinterpret_cast<const char*>(&v), 2);
    } else {
      out.write(reinterpret_cast<const char*>(&t), 4);
    }
  }
  if (doc_ends.empty()) doc_ends = {tokens.size()};
  std::ofstream index(ds.string() + ".index", std::ios::binary);
  index.write(reinterpret_cast<const char*>(doc_ends.data()), static_cast<std::streamsize>(doc_ends.size() * 8));
  if (with_metadata)
    std::ofstream(ds.string() + ".metadata") << tokenizer << "|" << token_size << "\n"
                                             << tokens.size() << "\n"
                                             << tokens.size() << " T";
}

inline std::vector<uint32_t> iota_tokens(size_t count, uint32_t start = 0) {
  std::vector<uint32_t> tokens(count);
  std::iota(tokens.begin(), tokens.end(), start);
  return tokens;
}

using triax::test::error_of;

}  // namespace triax::data::test
