// How `triax launch` learns each rank's outcome. `mpirun --enable-recovery` (which keeps the
// survivors of a dead rank alive so that they can report it) may return 0 although a rank
// failed, so every triax rank writes its exit status into the folder the launcher names, and
// triax-launch-rank (launched_rank.cpp), which mpirun starts around each rank, writes it for a
// command that did not; a rank that left none was killed or crashed.
#pragma once

#include <string>

namespace triax::cli {

// Set by `triax launch` for its ranks.
constexpr const char* kStatusFolderVariable = "TRIAX_LAUNCH_STATUS_DIR";
constexpr const char* kCommTimeoutVariable = "TRIAX_COMM_TIMEOUT_SECONDS";
// What mpirun starts for each rank, `triax-launch-rank COMMAND...`: the program beside the triax
// executable (apps/CMakeLists.txt names it so).
constexpr const char* kLaunchRankProgram = "triax-launch-rank";

// "<folder>/rank-<r>.status" for rank r.
std::string status_file(const std::string& folder, int rank);

// Writes this rank's exit status when launched by `triax launch` and returns the status the
// process should leave with: 0 once the file holds the real one, so that mpirun takes no rank
// for failed and starts none of its error handling (under --enable-recovery, Open MPI's PMIx
// prints a `PMIX ERROR: BAD-PARAM` line for every rank that ends with another status); the
// status itself otherwise.
int record_exit_status(int status);

// Whether this rank of a `triax launch` already recorded its status (false outside one).
bool rank_status_recorded();

// Records the status, flushes the standard streams and leaves without running destructors or
// exit handlers (std::_Exit): used when peers are gone and MPI_Finalize could wait forever.
[[noreturn]] void exit_now(int status);

}  // namespace triax::cli
