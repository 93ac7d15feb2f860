#include "tensorboard/tensorboard_writer.hpp"

#include <unistd.h>

#include <boost/crc.hpp>
#include <chrono>
#include <filesystem>

#include "src/tensorboard/event.pb.h"  // generated from event.proto
#include "triax/error.hpp"

namespace triax {
namespace {

namespace fs = std::filesystem;

double seconds_since_epoch() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace

uint32_t masked_crc32c(const std::string& bytes) {
  // CRC-32C: polynomial 0x1EDC6F41, reflected, initial value and final xor all ones.
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(bytes.data(), bytes.size());
  const uint32_t value = crc.checksum();
  return ((value >> 15) | (value << 17)) + 0xa282ead8u;
}

TensorBoardWriter::TensorBoardWriter(const std::string& folder, const std::string& key) {
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw ConfigError(key + ": cannot create the TensorBoard folder '" + folder + "': " + ec.message());
  const auto seconds = static_cast<int64_t>(seconds_since_epoch());
  path_ = (fs::path(folder) /
           ("events.out.tfevents." + std::to_string(seconds) + "." + host_name() + "." + std::to_string(getpid())))
              .string();
  out_.open(path_, std::ios::binary | std::ios::trunc);
  if (!out_)
    throw ConfigError(key + ": cannot write the TensorBoard event file '" + path_ + "' (is the folder writable?)");
  tensorboard::Event event;
  event.set_wall_time(seconds_since_epoch());
  event.set_file_version("brain.Event:2");
  write_record(event.SerializeAsString());
}

void TensorBoardWriter::write_scalars(int64_t step, const std::vector<std::pair<std::string, double>>& scalars) {
  tensorboard::Event event;
  event.set_wall_time(seconds_since_epoch());
  event.set_step(step);
  tensorboard::Summary* summary = event.mutable_summary();
  for (const auto& [tag, value] : scalars) {
    tensorboard::SummaryValue* entry = summary->add_value();
    entry->set_tag(tag);
    entry->set_simple_value(static_cast<float>(value));
  }
  write_record(event.SerializeAsString());
}

void TensorBoardWriter::write_record(const std::string& message) {
  std::string length(8, '\0');
  const uint64_t size = message.size();
  for (int i = 0; i < 8; ++i) length[static_cast<size_t>(i)] = static_cast<char>((size >> (8 * i)) & 0xff);
  auto put_u32 = [this](uint32_t value) {
    char bytes[4];
    for (int i = 0; i < 4; ++i) bytes[i] = static_cast<char>((value >> (8 * i)) & 0xff);
    out_.write(bytes, 4);
  };
  out_.write(length.data(), 8);
  put_u32(masked_crc32c(length));
  out_.write(message.data(), static_cast<std::streamsize>(message.size()));
  put_u32(masked_crc32c(message));
  out_.flush();
  if (!out_) throw Error("writing the TensorBoard event file " + path_ + " failed");
}

}  // namespace triax
