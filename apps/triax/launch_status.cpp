#include "launch_status.hpp"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>

#include "triax/interop/durable_file.hpp"

namespace triax::cli {

namespace {

// This process's status file when it is a rank of `triax launch`.
std::optional<std::string> own_status_file() {
  const char* folder = std::getenv(kStatusFolderVariable);
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (folder == nullptr || *folder == '\0' || rank == nullptr) return std::nullopt;
  return status_file(folder, std::atoi(rank));
}

}  // namespace

std::string status_file(const std::string& folder, int rank) {
  return folder + "/rank-" + std::to_string(rank) + ".status";
}

int record_exit_status(int status) {
  const std::optional<std::string> file = own_status_file();
  if (!file) return status;
  // Written durably: the launcher never reads half a file. On the way out, a status that cannot
  // be written is left out (the launcher then reports the rank as killed or crashed).
  try {
    write_file_durably(*file, std::to_string(status) + "\n");
    return 0;
  } catch (const std::exception&) {
    return status;
  }
}

bool rank_status_recorded() {
  const std::optional<std::string> file = own_status_file();
  std::error_code ignored;
  return file && std::filesystem::exists(*file, ignored);
}

void exit_now(int status) {
  const int leave_with = record_exit_status(status);
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(leave_with);
}

}  // namespace triax::cli
