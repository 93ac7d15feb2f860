// Test-only fault injection, compiled in always and inert unless TRIAX_FAULT is set:
//
//   TRIAX_FAULT=<point>[:<rank>[:<step>]][,<point>...]
//
// <rank> is a world rank, <step> a training step or a range <first>-<last>; either may be '*' or
// left out (any). Every point and what it does is listed in docs/reliability.md: kill points
// SIGKILL the process there (forward, backward, optimizer_step and the points of a checkpoint
// save); nan_loss and nan_grad make the step's loss or one gradient non-finite; disk_full makes
// writing the rank's checkpoint file fail with ENOSPC; error throws an ordinary error;
// slow_forward makes each micro-batch's forward take 100 ms longer (a step of known least length);
// slow_write makes writing the rank's checkpoint file take 1 s longer (a save still in flight);
// slow_prune makes removing each old checkpoint folder (keep_last) take 1 s longer;
// small_staging_room leaves a background save on a GPU room to stage only half its bytes.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

namespace triax::fault {

// How much longer slow_forward makes each micro-batch's forward.
inline constexpr std::chrono::milliseconds kSlowForwardDelay{100};
// How much longer slow_write makes writing a rank's checkpoint file.
inline constexpr std::chrono::milliseconds kSlowWriteDelay{1000};
// How much longer slow_prune makes removing each old checkpoint folder.
inline constexpr std::chrono::milliseconds kSlowPruneDelay{1000};

// True when TRIAX_FAULT names `point` for this rank and step. Throws triax::Error for a value
// that names an unknown point or cannot be read (a test that misspells a point fails loudly).
bool armed(std::string_view point, int rank, int64_t step);

// SIGKILLs this process when armed, after one line on stderr naming the point.
void kill_if_armed(std::string_view point, int rank, int64_t step);

}  // namespace triax::fault
