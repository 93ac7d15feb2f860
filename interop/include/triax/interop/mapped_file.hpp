// A read-only memory mapping of a whole file (POSIX mmap). Token files and safetensors files are
// read in place: the only copy of their data is the one into a tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace triax::interop {

class MappedFile {
 public:
  // Maps `path`; a missing or unreadable file is a triax::Error naming it. An empty file maps
  // to an empty view (mmap refuses length 0).
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&&) = delete;

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace triax::interop
