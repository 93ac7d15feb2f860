// Durable writes: a file (or folder) appears under its final name only complete and on disk.
//
// A DurableFile is written under a unique temporary name next to its target; commit() fsyncs it,
// renames it over the target and fsyncs the folder, so that after a crash the target holds either
// its previous content or the complete new one, never a part. A DurableFile destroyed without
// commit() (an exception on the way) removes its temporary file. Checkpoints, their `latest`
// pointer and metadata, safetensors files and Hugging Face folders are all written this way.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace triax {

class DurableFile {
 public:
  // Creates "<target>.tmp.XXXXXX" in target's folder; throws triax::Error naming target.
  explicit DurableFile(std::filesystem::path target);
  ~DurableFile();
  DurableFile(const DurableFile&) = delete;
  DurableFile& operator=(const DurableFile&) = delete;

  // For writers that stream (pwrite, a format library writing to a descriptor).
  int fd() const { return fd_; }
  const std::filesystem::path& temporary_path() const { return temporary_; }
  const std::filesystem::path& target() const { return target_; }

  // Writes all of `size` bytes (retrying short writes and EINTR).
  void write(const void* data, size_t size);
  void write(std::string_view text) { write(text.data(), text.size()); }

  // fsync, close, rename over the target, fsync of the target's folder.
  void commit();

 private:
  std::filesystem::path target_;
  std::filesystem::path temporary_;
  int fd_ = -1;
  bool committed_ = false;
};

// Writes `content` to `target` durably (a DurableFile written at once).
void write_file_durably(const std::filesystem::path& target, std::string_view content);

// fsyncs a file or a folder: for a folder, the names created, removed or renamed inside it.
void sync_path(const std::filesystem::path& path);

// Renames `from` (a file or a folder whose content is already durable) to `to` and fsyncs the
// folder holding `to`, so that the new name survives a crash.
void rename_durably(const std::filesystem::path& from, const std::filesystem::path& to);

}  // namespace triax
