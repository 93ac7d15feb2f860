// The safetensors file format (Hugging Face's weight files):
//
//   8 bytes   N, the header length, unsigned little-endian
//   N bytes   a JSON object: {"<name>": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]},
//             ..., "__metadata__": {"<key>": "<string>", ...}}, padded with spaces
//   the rest  the byte buffer: each tensor's elements, row-major, little-endian, at
//             [begin, end) counted from the buffer's start
//
// Supported dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "triax/interop/mapped_file.hpp"

namespace triax::interop {

// "BF16" for at::kBFloat16 and so on; a triax::Error for a type the format cannot hold.
std::string safetensors_dtype_name(at::ScalarType dtype);

// One tensor to write: its bytes come later, from the caller (see write_safetensors below).
struct SafetensorsEntry {
  std::string name;
  at::ScalarType dtype;
  std::vector<int64_t> shape;
};

// Writes `entries` to `path`. `tensor_of(i)` is called once per entry, in buffer order, and must
// return a tensor of that entry's dtype and shape (on any device, any layout): only one such
// tensor is alive at a time, so a caller converting dtypes or moving from a GPU never holds a
// second copy of the whole model. The file is written under a temporary name next to `path`,
// fsynced and renamed: a reader never sees a partial file. The header is padded with spaces to a
// multiple of 8 bytes, and the buffer holds the tensors by decreasing element size (stable
// otherwise), so every tensor starts at an offset aligned to its element size.
// Errors (bad names, duplicates, unsupported dtypes, I/O) name the file and the tensor.
void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                       const std::function<at::Tensor(size_t)>& tensor_of,
                       const std::map<std::string, std::string>& metadata = {});

// Writes tensors as they are (dtype and shape taken from each tensor).
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// A safetensors file, memory-mapped and validated when opened: the header length lies inside the
// file, the header is a JSON object, every entry has a known dtype, a shape and data_offsets that
// lie inside the buffer and span exactly numel * element size bytes, and the entries cover the
// buffer without overlaps or holes (as the format requires). Every error names the file and,
// where one is concerned, the tensor.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return file_.path(); }
  // Tensor names in buffer order.
  const std::vector<std::string>& names() const { return names_; }
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  at::ScalarType dtype(const std::string& name) const;
  const std::vector<int64_t>& shape(const std::string& name) const;
  int64_t nbytes(const std::string& name) const;
  // An owned CPU copy: one memcpy from the mapping, no other pass over the data.
  at::Tensor read(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  struct Entry {
    at::ScalarType dtype;
    std::vector<int64_t> shape;
    size_t begin = 0;  // within the buffer
    size_t end = 0;
  };
  const Entry& entry(const std::string& name) const;

  MappedFile file_;
  size_t buffer_start_ = 0;  // 8 + header length
  std::vector<std::string> names_;
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace triax::interop
