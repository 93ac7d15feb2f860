// Reading a checkpoint step folder at any topology.
//
// Every rank file lists its pieces: a shard of a parameter (or of an optimizer state) with its
// place in the whole tensor — box offset and shape, and for a ZeRO shard the range of the box's
// flattened elements it covers. Loading a target shard copies from every piece overlapping it,
// whatever dp/tp/pp/zero wrote them, and checks that the target's meaningful elements were all
// covered. Every dataset read is checked against its stored CRC-32. Errors name the step folder,
// the file and the tensor.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "triax/core/checkpoint/checkpoint_metadata.hpp"
#include "triax/parameter.hpp"

namespace triax::interop {
class Hdf5File;
}  // namespace triax::interop

namespace triax::checkpoint {

// One stored dataset that holds part of a tensor.
struct StoredPiece {
  size_t file = 0;  // index into the step's files
  std::string dataset;
  std::string dtype;
  std::vector<int64_t> global_shape;    // of the whole tensor, padding included, as saved
  std::vector<int64_t> unpadded_shape;  // its meaningful part
  std::vector<int64_t> box_offset, box_shape;
  int64_t element_begin = 0;  // first element of the flattened box held
  int64_t numel = 0;          // elements held
  bool per_parameter = false;
  uint32_t crc32 = 0;
};

class CheckpointReader {
 public:
  // `path`: a step folder, or a folder whose `latest` names one.
  explicit CheckpointReader(const std::string& path);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const std::filesystem::path& folder() const { return folder_; }
  const CheckpointMetadata& metadata() const { return metadata_; }
  std::string resolved_config() const;  // config.yaml of the saving run

  std::vector<std::string> parameter_names() const;
  std::vector<int64_t> parameter_shape(const std::string& name) const;  // unpadded
  std::string parameter_dtype(const std::string& name) const;

  // Copies the stored values into `target`'s live shard (converted to its dtype; padding zeroed).
  // The fp32 master is preferred to the stored parameter when the checkpoint has one.
  void load_parameter(const NamedParameter& target) const;
  // The whole parameter (unpadded shape), in the stored dtype, or fp32 from the master.
  at::Tensor whole_parameter(const std::string& name) const;

  bool has_state(const std::string& parameter, const std::string& state) const;
  // Copies a stored optimizer state into `live`, which covers elements [element_offset,
  // element_offset + numel) of `parameter`'s flattened shard (or is its per-parameter value).
  void load_state(const NamedParameter& parameter, const std::string& state, const at::Tensor& live,
                  int64_t element_offset, bool per_parameter) const;

  std::optional<at::Tensor> rng_state(int rank, const std::string& generator) const;

  struct DatasetCheck {
    std::string file, dataset, dtype;
    std::vector<int64_t> shape;
    int64_t bytes = 0;
    std::string problem;  // empty when the checksum matched
  };
  // Reads every dataset of every file and verifies its checksum.
  std::vector<DatasetCheck> verify() const;

 private:
  at::Tensor read_piece(const StoredPiece& piece) const;
  // Values of the box [offset, offset + shape) of a tensor from `pieces`; `covered` marks the
  // elements some piece provided. Padding (beyond the unpadded shape) stays zero.
  at::Tensor assemble(const std::string& what, const std::vector<StoredPiece>& pieces,
                      const std::vector<int64_t>& offset, const std::vector<int64_t>& shape,
                      at::Tensor& covered) const;
  void check_shape(const std::string& what, const std::vector<StoredPiece>& pieces,
                   const std::vector<int64_t>& expected) const;

  std::filesystem::path folder_;
  CheckpointMetadata metadata_;
  std::vector<std::unique_ptr<interop::Hdf5File>> files_;
  std::map<std::string, std::vector<StoredPiece>> model_pieces_;
  std::map<std::pair<std::string, std::string>, std::vector<StoredPiece>> state_pieces_;
};

}  // namespace triax::checkpoint
