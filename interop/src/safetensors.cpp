#include "triax/interop/safetensors.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "triax/interop/durable_file.hpp"
#include "triax/error.hpp"
#include "triax/tensor_text.hpp"

// The format is little-endian; so is every machine triax runs on. Tensors are copied byte for byte.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors I/O assumes a little-endian host");

namespace triax::interop {
namespace {

using Json = nlohmann::json;
constexpr const char* kMetadataKey = "__metadata__";

struct DtypeName {
  const char* name;
  at::ScalarType dtype;
};
constexpr DtypeName kDtypes[] = {
    {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf}, {"BF16", at::kBFloat16}, {"I64", at::kLong},
    {"I32", at::kInt},    {"I16", at::kShort}, {"I8", at::kChar},  {"U8", at::kByte},       {"BOOL", at::kBool},
};

bool safetensors_dtype_from_name(const std::string& name, at::ScalarType& out) {
  for (const DtypeName& d : kDtypes) {
    if (name == d.name) {
      out = d.dtype;
      return true;
    }
  }
  return false;
}

// numel * element size, or false on overflow.
bool byte_size(const std::vector<int64_t>& shape, at::ScalarType dtype, uint64_t& out) {
  uint64_t bytes = c10::elementSize(dtype);
  for (int64_t dim : shape) {
    if (dim < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(dim), &bytes)) return false;
  }
  out = bytes;
  return true;
}

// nlohmann keeps the last of duplicate keys silently; the format forbids them.
Json parse_header(const char* begin, const char* end, const std::string& path) {
  std::vector<std::set<std::string>> open_objects;
  auto callback = [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == Json::parse_event_t::object_end) {
      open_objects.pop_back();
    } else if (event == Json::parse_event_t::key) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second)
        throw Error(path + ": safetensors header: duplicate key '" + key + "'");
    }
    return true;
  };
  try {
    return Json::parse(begin, end, callback);
  } catch (const Json::exception& e) {
    throw Error(path + ": safetensors header is not valid JSON: " + e.what());
  }
}

}  // namespace

std::string safetensors_dtype_name(at::ScalarType dtype) {
  for (const DtypeName& d : kDtypes)
    if (d.dtype == dtype) return d.name;
  throw Error(std::string("safetensors cannot hold dtype ") + c10::toString(dtype) +
              " (supported: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)");
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                       const std::function<at::Tensor(size_t)>& tensor_of,
                       const std::map<std::string, std::string>& metadata) {
  auto fail = [&](const std::string& tensor, const std::string& message) {
    throw Error(path + ": tensor '" + tensor + "': " + message);
  };
  std::set<std::string> seen;
  std::vector<uint64_t> sizes(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const SafetensorsEntry& e = entries[i];
    if (e.name.empty()) throw Error(path + ": a tensor has an empty name");
    if (e.name == kMetadataKey) fail(e.name, "the name is reserved for the metadata");
    if (!seen.insert(e.name).second) fail(e.name, "given twice");
    try {
      safetensors_dtype_name(e.dtype);
    } catch (const Error& error) {
      fail(e.name, error.what());
    }
    if (!byte_size(e.shape, e.dtype, sizes[i])) fail(e.name, "invalid shape " + shape_text(e.shape));
  }

  // Larger elements first: every tensor then starts at a multiple of its element size.
  std::vector<size_t> order(entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return c10::elementSize(entries[a].dtype) > c10::elementSize(entries[b].dtype);
  });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  uint64_t offset = 0;
  for (size_t i : order) {
    const SafetensorsEntry& e = entries[i];
    header[e.name] = {
        {"dtype", safetensors_dtype_name(e.dtype)}, {"shape", e.shape}, {"data_offsets", {offset, offset + sizes[i]}}};
    offset += sizes[i];
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the buffer starts 8-byte aligned
  const uint64_t header_length = text.size();

  DurableFile file(path);
  file.write(&header_length, sizeof header_length);
  file.write(text);
  for (size_t i : order) {
    const SafetensorsEntry& e = entries[i];
    at::Tensor tensor = tensor_of(i);
    if (!tensor.defined()) fail(e.name, "no tensor given");
    if (tensor.scalar_type() != e.dtype)
      fail(e.name,
           std::string("expected dtype ") + c10::toString(e.dtype) + ", got " + c10::toString(tensor.scalar_type()));
    if (tensor.sizes().vec() != e.shape)
      fail(e.name, "expected shape " + shape_text(e.shape) + ", got " + shape_text(tensor.sizes().vec()));
    // No-ops for a contiguous CPU tensor: the bytes are written straight from it.
    tensor = tensor.cpu().contiguous();
    file.write(tensor.data_ptr(), sizes[i]);
  }
  file.commit();
}

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsEntry> entries;
  entries.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.defined()) throw Error(path + ": tensor '" + name + "': no tensor given");
    entries.push_back({name, tensor.scalar_type(), tensor.sizes().vec()});
  }
  write_safetensors(
      path, entries, [&](size_t i) { return tensors[i].second; }, metadata);
}

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(path) {
  auto fail = [&](const std::string& message) { throw Error(path + ": " + message); };
  const size_t size = file_.size();
  const char* data = reinterpret_cast<const char*>(file_.data());
  if (size < 8)
    fail("not a safetensors file: " + std::to_string(size) + " bytes, shorter than the 8-byte header length");
  uint64_t header_length = 0;
  std::memcpy(&header_length, data, 8);
  if (header_length > size - 8)
    fail("truncated or not a safetensors file: the header length " + std::to_string(header_length) +
         " runs past the end of the file (" + std::to_string(size) + " bytes)");
  buffer_start_ = 8 + header_length;
  const uint64_t buffer_size = size - buffer_start_;

  const Json header = parse_header(data + 8, data + buffer_start_, path);
  if (!header.is_object()) fail("the safetensors header is not a JSON object");

  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey) {
      if (!value.is_object()) fail("__metadata__ is not a JSON object");
      for (const auto& [key, text] : value.items()) {
        if (!text.is_string()) fail("__metadata__['" + key + "'] is not a string: " + text.dump());
        metadata_[key] = text.get<std::string>();
      }
      continue;
    }
    auto tensor_fail = [&](const std::string& message) { fail("tensor '" + name + "': " + message); };
    if (!value.is_object()) tensor_fail("expected a JSON object, got " + value.dump());
    for (const auto& [field, unused] : value.items()) {
      (void)unused;
      if (field != "dtype" && field != "shape" && field != "data_offsets")
        tensor_fail("unknown field '" + field + "' (expected dtype, shape, data_offsets)");
    }
    for (const char* field : {"dtype", "shape", "data_offsets"})
      if (!value.contains(field)) tensor_fail(std::string("missing field '") + field + "'");

    Entry entry;
    const Json& dtype = value["dtype"];
    if (!dtype.is_string() || !safetensors_dtype_from_name(dtype.get<std::string>(), entry.dtype))
      tensor_fail("unsupported dtype " + dtype.dump() + " (supported: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)");
    const Json& shape = value["shape"];
    if (!shape.is_array()) tensor_fail("shape is not a list: " + shape.dump());
    for (const Json& dim : shape) {
      if (!dim.is_number_unsigned()) tensor_fail("shape " + shape.dump() + " holds something other than a size");
      entry.shape.push_back(dim.get<int64_t>());
    }
    const Json& offsets = value["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      tensor_fail("data_offsets must be two byte offsets [begin, end], got " + offsets.dump());
    const uint64_t begin = offsets[0].get<uint64_t>();
    const uint64_t end = offsets[1].get<uint64_t>();
    if (begin > end || end > buffer_size)
      tensor_fail("data_offsets " + offsets.dump() + " lie outside the " + std::to_string(buffer_size) +
                  "-byte data buffer");
    uint64_t expected = 0;
    if (!byte_size(entry.shape, entry.dtype, expected)) tensor_fail("shape " + shape.dump() + " is too large");
    if (end - begin != expected)
      tensor_fail("data_offsets " + offsets.dump() + " span " + std::to_string(end - begin) + " bytes, but " +
                  dtype.get<std::string>() + " of shape " + shape.dump() + " needs " + std::to_string(expected));
    entry.begin = begin;
    entry.end = end;
    entries_.emplace(name, std::move(entry));
    names_.push_back(name);
  }

  // The tensors tile the buffer: no overlap, no hole, nothing after the last one.
  std::sort(names_.begin(), names_.end(), [&](const std::string& a, const std::string& b) {
    const Entry& x = entries_.at(a);
    const Entry& y = entries_.at(b);
    return std::tie(x.begin, x.end, a) < std::tie(y.begin, y.end, b);
  });
  uint64_t covered = 0;
  const std::string* previous = nullptr;
  for (const std::string& name : names_) {
    const Entry& e = entries_.at(name);
    if (e.begin < covered)
      fail("tensors '" + *previous + "' and '" + name + "' overlap in the data buffer (bytes " +
           std::to_string(e.begin) + " to " + std::to_string(covered) + ")");
    if (e.begin > covered)
      fail("bytes " + std::to_string(covered) + " to " + std::to_string(e.begin) +
           " of the data buffer belong to no tensor (before tensor '" + name + "')");
    covered = e.end;
    previous = &name;
  }
  if (covered != buffer_size)
    fail("bytes " + std::to_string(covered) + " to " + std::to_string(buffer_size) +
         " at the end of the data buffer belong to no tensor");
}

const SafetensorsFile::Entry& SafetensorsFile::entry(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw Error(path() + ": no tensor '" + name + "'");
  return it->second;
}

at::ScalarType SafetensorsFile::dtype(const std::string& name) const { return entry(name).dtype; }

const std::vector<int64_t>& SafetensorsFile::shape(const std::string& name) const { return entry(name).shape; }

int64_t SafetensorsFile::nbytes(const std::string& name) const {
  const Entry& e = entry(name);
  return static_cast<int64_t>(e.end - e.begin);
}

at::Tensor SafetensorsFile::read(const std::string& name) const {
  const Entry& e = entry(name);
  at::Tensor out = at::empty(e.shape, at::TensorOptions().dtype(e.dtype));
  if (e.end > e.begin) std::memcpy(out.data_ptr(), file_.data() + buffer_start_ + e.begin, e.end - e.begin);
  return out;
}

}  // namespace triax::interop
