#include "triax/interop/hdf5_file.hpp"

#include <ATen/ATen.h>
#include <hdf5.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "triax/error.hpp"
#include "triax/tensor_text.hpp"

namespace triax::interop {
namespace {

static_assert(sizeof(hid_t) == sizeof(int64_t), "hid_t is stored as int64_t");

// HDF5 prints its own error stack to stderr by default; triax reports errors itself.
void silence_hdf5_errors() {
  static std::once_flag once;
  std::call_once(once, [] { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); });
}

// Closes an HDF5 handle of any kind when it goes out of scope.
class Handle {
 public:
  explicit Handle(hid_t id = -1) : id_(id) {}
  ~Handle() {
    if (id_ >= 0) H5Idec_ref(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_;
};

// An IEEE-like float of 16 bits with the given exponent and mantissa widths (bf16: 8/7, fp16:
// 5/10); HDF5 converts it to f32 when a reader asks for floats.
hid_t half_type(size_t exponent_bits, size_t mantissa_bits, size_t bias) {
  hid_t type = H5Tcopy(H5T_IEEE_F32LE);
  H5Tset_fields(type, 15, mantissa_bits, exponent_bits, 0, mantissa_bits);
  H5Tset_precision(type, 16);
  H5Tset_size(type, 2);
  H5Tset_ebias(type, bias);
  return type;
}

// The HDF5 file type of a scalar type (a new handle).
hid_t file_type_of(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return H5Tcopy(H5T_IEEE_F32LE);
    case at::kDouble: return H5Tcopy(H5T_IEEE_F64LE);
    case at::kBFloat16: return half_type(8, 7, 127);
    case at::kHalf: return half_type(5, 10, 15);
    case at::kLong: return H5Tcopy(H5T_STD_I64LE);
    case at::kInt: return H5Tcopy(H5T_STD_I32LE);
    case at::kByte: return H5Tcopy(H5T_STD_U8LE);
    case at::kBool: return H5Tcopy(H5T_STD_U8LE);
    default: return -1;
  }
}

herr_t collect_child(hid_t, const char* name, const H5L_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->emplace_back(name);
  return 0;
}

}  // namespace

Hdf5File Hdf5File::create(const std::string& path) {
  silence_hdf5_errors();
  Handle access(H5Pcreate(H5P_FILE_ACCESS));
  // Large datasets start on 4 KiB boundaries: aligned, sequential writes go at the disk's speed.
  H5Pset_alignment(access.get(), 1 << 20, 4096);
  // HDF5 1.8's file format: its superblock and object headers carry checksums, so a flipped byte
  // in the file's structure (not only in a tensor, which crc32 covers) is an error on open.
  H5Pset_libver_bounds(access.get(), H5F_LIBVER_V18, H5F_LIBVER_V18);
  hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get());
  if (file < 0) throw Error(TRIAX_ERROR_RUNTIME, "cannot create the checkpoint file " + path);
  return Hdf5File(path, file);
}

Hdf5File Hdf5File::open_read(const std::string& path) {
  silence_hdf5_errors();
  if (::access(path.c_str(), R_OK) != 0) throw Error(TRIAX_ERROR_RUNTIME, "checkpoint file " + path + " is missing or unreadable");
  if (H5Fis_hdf5(path.c_str()) <= 0)
    throw Error(TRIAX_ERROR_RUNTIME, "checkpoint file " + path + " is not an HDF5 file (truncated or overwritten?)");
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) throw Error(TRIAX_ERROR_RUNTIME, "cannot open the checkpoint file " + path + " (truncated or corrupt?)");
  return Hdf5File(path, file);
}

Hdf5File::~Hdf5File() {
  if (handle_ >= 0) H5Fclose(handle_);
}

Hdf5File::Hdf5File(Hdf5File&& other) noexcept : path_(std::move(other.path_)), handle_(other.handle_) {
  other.handle_ = -1;
}

// Why the last write failed, as the system said it to HDF5's file driver ("No space left on device").
static std::string system_reason() { return errno != 0 ? std::strerror(errno) : "disk full?"; }

void Hdf5File::fail(const std::string& object, const std::string& what) const {
  throw Error(TRIAX_ERROR_RUNTIME, "checkpoint file " + path_ + (object.empty() ? "" : ", " + object) + ": " + what);
}

void Hdf5File::ensure_groups(const std::string& object) {
  for (size_t slash = object.find('/', 1); slash != std::string::npos; slash = object.find('/', slash + 1)) {
    const std::string group = object.substr(0, slash);
    if (H5Lexists(handle_, group.c_str(), H5P_DEFAULT) > 0) continue;
    Handle created(H5Gcreate2(handle_, group.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    if (!created.valid()) fail(group, "cannot create the group");
  }
}

void Hdf5File::write_tensor(const std::string& object, const at::Tensor& tensor) {
  if (!tensor.device().is_cpu() || !tensor.is_contiguous()) fail(object, "only contiguous CPU tensors are written");
  Handle type(file_type_of(tensor.scalar_type()));
  if (!type.valid()) fail(object, "cannot store tensors of type " + std::string(c10::toString(tensor.scalar_type())));
  ensure_groups(object);
  std::vector<hsize_t> dims(tensor.sizes().begin(), tensor.sizes().end());
  Handle space(dims.empty() ? H5Screate(H5S_SCALAR)
                            : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  Handle dataset(H5Dcreate2(handle_, object.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  if (!dataset.valid()) fail(object, "cannot create the dataset (a duplicate name?)");
  // The memory layout equals the file type's (little-endian, same widths): HDF5 copies bytes.
  errno = 0;
  if (tensor.numel() > 0 && H5Dwrite(dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, tensor.data_ptr()) < 0)
    fail(object, "writing " + std::to_string(tensor.nbytes()) + " bytes failed: " + system_reason());
  set_string(object, "dtype", dtype_name(tensor.scalar_type()));
}

std::vector<int64_t> Hdf5File::dataset_shape(const std::string& object) const {
  Handle dataset(H5Dopen2(handle_, object.c_str(), H5P_DEFAULT));
  if (!dataset.valid()) fail(object, "no such dataset");
  Handle space(H5Dget_space(dataset.get()));
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) fail(object, "unreadable dataspace");
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return std::vector<int64_t>(dims.begin(), dims.end());
}

std::string Hdf5File::dataset_dtype(const std::string& object) const {
  if (!has_attribute(object, "dtype")) fail(object, "the dataset has no dtype attribute (not written by triax)");
  return string(object, "dtype");
}

at::Tensor Hdf5File::read_tensor(const std::string& object) const {
  const std::string dtype = dataset_dtype(object);
  const std::optional<at::ScalarType> scalar = dtype_from_name(dtype);
  if (!scalar) fail(object, "unknown dtype '" + dtype + "'");
  const std::vector<int64_t> shape = dataset_shape(object);
  Handle dataset(H5Dopen2(handle_, object.c_str(), H5P_DEFAULT));
  Handle file_type(H5Dget_type(dataset.get()));
  Handle expected(file_type_of(*scalar));
  if (H5Tget_size(file_type.get()) != H5Tget_size(expected.get()))
    fail(object, "stored elements are " + std::to_string(H5Tget_size(file_type.get())) + " bytes wide, but " + dtype +
                     " takes " + std::to_string(H5Tget_size(expected.get())));
  at::Tensor out = at::empty(shape, at::TensorOptions().dtype(*scalar));
  // Read with the file's own type: the bytes arrive unconverted.
  if (out.numel() > 0 && H5Dread(dataset.get(), file_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data_ptr()) < 0)
    fail(object, "reading the data failed (truncated file?)");
  return out;
}

bool Hdf5File::exists(const std::string& object) const {
  // Each prefix must exist before H5Lexists may be asked about the next one.
  for (size_t slash = object.find('/', 1);; slash = object.find('/', slash + 1)) {
    const std::string prefix = object.substr(0, slash);
    if (H5Lexists(handle_, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (slash == std::string::npos) return true;
  }
}

std::vector<std::string> Hdf5File::children(const std::string& group) const {
  std::vector<std::string> names;
  if (!exists(group)) return names;
  Handle opened(H5Gopen2(handle_, group.c_str(), H5P_DEFAULT));
  if (!opened.valid()) fail(group, "not a group");
  if (H5Literate(opened.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_child, &names) < 0)
    fail(group, "cannot list the group");
  return names;
}

void Hdf5File::set_integers(const std::string& object, const std::string& name, const std::vector<int64_t>& values) {
  const hsize_t count = values.size();
  Handle space(H5Screate_simple(1, &count, nullptr));
  Handle attribute(H5Acreate_by_name(handle_, object.c_str(), name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT,
                                     H5P_DEFAULT, H5P_DEFAULT));
  if (!attribute.valid() || H5Awrite(attribute.get(), H5T_NATIVE_INT64, values.data()) < 0)
    fail(object, "cannot write the attribute " + name);
}

void Hdf5File::set_string(const std::string& object, const std::string& name, const std::string& value) {
  Handle type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), std::max<size_t>(1, value.size()));
  H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
  Handle space(H5Screate(H5S_SCALAR));
  Handle attribute(
      H5Acreate_by_name(handle_, object.c_str(), name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  std::string padded = value.empty() ? std::string(1, '\0') : value;
  if (!attribute.valid() || H5Awrite(attribute.get(), type.get(), padded.data()) < 0)
    fail(object, "cannot write the attribute " + name);
}

bool Hdf5File::has_attribute(const std::string& object, const std::string& name) const {
  return H5Aexists_by_name(handle_, object.c_str(), name.c_str(), H5P_DEFAULT) > 0;
}

std::vector<int64_t> Hdf5File::integers(const std::string& object, const std::string& name) const {
  Handle attribute(H5Aopen_by_name(handle_, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT));
  if (!attribute.valid()) fail(object, "missing attribute " + name);
  Handle space(H5Aget_space(attribute.get()));
  const hssize_t count = H5Sget_simple_extent_npoints(space.get());
  if (count < 0) fail(object, "unreadable attribute " + name);
  std::vector<int64_t> values(static_cast<size_t>(count));
  if (count > 0 && H5Aread(attribute.get(), H5T_NATIVE_INT64, values.data()) < 0)
    fail(object, "unreadable attribute " + name);
  return values;
}

std::string Hdf5File::string(const std::string& object, const std::string& name) const {
  Handle attribute(H5Aopen_by_name(handle_, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT));
  if (!attribute.valid()) fail(object, "missing attribute " + name);
  Handle type(H5Aget_type(attribute.get()));
  if (H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) > 0)
    fail(object, "attribute " + name + " is not a fixed-length string");
  std::string value(H5Tget_size(type.get()), '\0');
  if (H5Aread(attribute.get(), type.get(), value.data()) < 0) fail(object, "unreadable attribute " + name);
  value.resize(std::strlen(value.c_str()));
  return value;
}

void Hdf5File::close() {
  if (handle_ < 0) return;
  errno = 0;
  const herr_t closed = H5Fclose(handle_);
  handle_ = -1;
  if (closed < 0) fail("", "closing the file failed: " + system_reason());
}

}  // namespace triax::interop
