// Preemption. The signals of general.preemption_signals (SIGTERM and SIGUSR1 by default: what
// Slurm sends before it ends a job) ask the run to stop: the ranks agree at the next step
// boundary, save a checkpoint and leave with status 0. A second signal aborts the save that is
// under way before it becomes visible, so that the previous checkpoint stays `latest`.
#pragma once

#include <string>
#include <vector>

namespace triax::preemption {

// Installs the handlers for the named signals ("SIGTERM", ...) for its lifetime and restores
// the previous ones afterwards. A signal counts from the moment it arrives until the end of the
// process (the handlers only set flags).
class SignalWatch {
 public:
  explicit SignalWatch(const std::vector<std::string>& signal_names);
  ~SignalWatch();
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

 private:
  std::vector<int> signals_;
  std::vector<void (*)(int)> previous_;
};

// The first preemption signal this process received (its number), 0 when none.
int signal_received();
// True once a second preemption signal arrived.
bool abort_requested();
// Forgets the signals received (for a new run in the same process, as tests do).
void reset();

// "SIGTERM" for 15; the number for a signal without a name here.
std::string signal_name(int signal_number);
// 15 for "SIGTERM"; 0 for a name this module does not handle.
int signal_number(const std::string& name);

}  // namespace triax::preemption
