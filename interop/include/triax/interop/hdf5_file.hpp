// One HDF5 file of a checkpoint, through HDF5's C API: tensors as datasets (bf16 and fp16 as named
// HDF5 float types, so h5dump shows their values), small attributes (integer arrays, strings),
// and groups created on demand: the files of triax's checkpoints. Every failure is an Error
// naming the file and the object.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace triax::interop {

class Hdf5File {
 public:
  static Hdf5File create(const std::string& path);     // truncates an existing file
  static Hdf5File open_read(const std::string& path);  // a missing or foreign file is an error
  ~Hdf5File();
  Hdf5File(Hdf5File&& other) noexcept;
  Hdf5File& operator=(Hdf5File&&) = delete;
  Hdf5File(const Hdf5File&) = delete;
  Hdf5File& operator=(const Hdf5File&) = delete;

  const std::string& path() const { return path_; }

  // Writes a contiguous CPU tensor as dataset `object` ("/model/<name>"), creating parent groups,
  // with a "dtype" attribute naming its scalar type. Returns nothing; attributes follow.
  void write_tensor(const std::string& object, const at::Tensor& tensor);
  // Reads a dataset written by write_tensor into a new CPU tensor of its dtype and shape.
  at::Tensor read_tensor(const std::string& object) const;
  // Shape and dtype name of a dataset without reading it.
  std::vector<int64_t> dataset_shape(const std::string& object) const;
  std::string dataset_dtype(const std::string& object) const;

  bool exists(const std::string& object) const;
  // Names of the members of a group, in name order (empty for a missing group).
  std::vector<std::string> children(const std::string& group) const;

  void set_integers(const std::string& object, const std::string& name, const std::vector<int64_t>& values);
  void set_string(const std::string& object, const std::string& name, const std::string& value);
  std::vector<int64_t> integers(const std::string& object, const std::string& name) const;
  std::string string(const std::string& object, const std::string& name) const;
  bool has_attribute(const std::string& object, const std::string& name) const;

  // Closes the file, reporting what HDF5 could not flush. Durability is the caller's: the
  // checkpoint writer creates the file under a DurableFile's temporary name and commits it.
  void close();

 private:
  Hdf5File(std::string path, int64_t handle) : path_(std::move(path)), handle_(handle) {}
  void ensure_groups(const std::string& object);
  [[noreturn]] void fail(const std::string& object, const std::string& what) const;

  std::string path_;
  int64_t handle_ = -1;  // hid_t
};

}  // namespace triax::interop
