// TensorBoard event files: scalars per step, readable by TensorBoard and its Python package.
// The records are protobuf messages (event.proto) in TFRecord framing: a little-endian uint64
// length, the masked CRC-32C of those 8 bytes, the message, the masked CRC-32C of the message.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace triax {

class TensorBoardWriter {
 public:
  // Creates `folder` and a new events.out.tfevents.<seconds>.<host>.<pid> file in it. A folder
  // or file that cannot be written is a ConfigError naming `key` (the config key that chose the
  // folder) and the path, raised before any training.
  TensorBoardWriter(const std::string& folder, const std::string& key);

  // One Event at `step` holding every (tag, value) as a scalar summary; flushed. Throws Error
  // when the write fails.
  void write_scalars(int64_t step, const std::vector<std::pair<std::string, double>>& scalars);

  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& message);

  std::string path_;
  std::ofstream out_;
};

// The TFRecord checksum: CRC-32C (Castagnoli), rotated right by 15 bits plus a constant.
uint32_t masked_crc32c(const std::string& bytes);

}  // namespace triax
