#include "launch_status.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>

namespace triax::cli {

std::string status_file(const std::string& folder, int rank) {
  return folder + "/rank-" + std::to_string(rank) + ".status";
}

void record_exit_status(int status) {
  const char* folder = std::getenv(kStatusFolderVariable);
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (folder == nullptr || *folder == '\0' || rank == nullptr) return;
  // Written under a temporary name and renamed: the launcher never reads half a file.
  const std::string path = status_file(folder, std::atoi(rank));
  const std::string partial = path + ".partial";
  {
    std::ofstream out(partial);
    out << status << "\n";
  }
  std::rename(partial.c_str(), path.c_str());
}

void exit_now(int status) {
  record_exit_status(status);
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(status);
}

}  // namespace triax::cli
