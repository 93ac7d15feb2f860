#include "triax/interop/durable_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "triax/error.hpp"

namespace triax {
namespace {

namespace fs = std::filesystem;

std::string errno_text() { return std::strerror(errno); }

fs::path folder_of(const fs::path& path) { return path.parent_path().empty() ? fs::path(".") : path.parent_path(); }

}  // namespace

DurableFile::DurableFile(fs::path target) : target_(std::move(target)) {
  std::string pattern = target_.string() + ".tmp.XXXXXX";
  fd_ = ::mkostemp(pattern.data(), O_CLOEXEC);
  if (fd_ < 0) throw Error(target_.string() + ": cannot create a temporary file next to it: " + errno_text());
  temporary_ = pattern;
  // mkostemp creates the file 0600; a finished file is readable by others, as files usually are.
  ::fchmod(fd_, 0644);
}

DurableFile::~DurableFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temporary_.c_str());
}

void DurableFile::write(const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    // Linux writes at most about 2 GiB per call.
    const ssize_t written = ::write(fd_, p, std::min<size_t>(size, size_t{1} << 30));
    if (written < 0) {
      if (errno == EINTR) continue;
      throw Error(target_.string() + ": cannot write: " + errno_text());
    }
    p += written;
    size -= static_cast<size_t>(written);
  }
}

void DurableFile::commit() {
  if (::fsync(fd_) != 0) throw Error(target_.string() + ": cannot fsync: " + errno_text());
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw Error(target_.string() + ": cannot close: " + errno_text());
  rename_durably(temporary_, target_);
  committed_ = true;
}

void write_file_durably(const fs::path& target, std::string_view content) {
  DurableFile file(target);
  file.write(content);
  file.commit();
}

void sync_path(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path.string() + ": cannot open it to fsync: " + errno_text());
  const int result = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  // Some file systems cannot fsync a folder (EINVAL); their renames are as durable as they get.
  if (result != 0 && !(saved == EINVAL && fs::is_directory(path)))
    throw Error(path.string() + ": cannot fsync: " + std::strerror(saved));
}

void rename_durably(const fs::path& from, const fs::path& to) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    throw Error(to.string() + ": cannot rename " + from.string() + " into place: " + errno_text());
  sync_path(folder_of(to));
}

}  // namespace triax
