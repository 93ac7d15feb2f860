// `triax-launch-rank COMMAND...`: what mpirun starts for each rank of `triax launch`. It runs
// COMMAND as its child and records COMMAND's exit status into the launch's status folder unless
// COMMAND recorded its own (a triax rank does): under --enable-recovery mpirun returns 0 whatever
// its processes returned, so without this a failing command of another kind (`false`, a script)
// left nothing and the launch exited 0.
//
// It stands between mpirun and the rank without changing how the rank is signalled or killed:
// the signals a rank handles (preemption) are forwarded to it, the rank runs in its own process
// group (so a signal mpirun sends to this process's group reaches it once, through here), it gets
// SIGKILL when this process dies (a rank killed from outside through this pid dies as before),
// and a rank killed by a signal makes this process die of the same signal. A program of its own,
// without LibTorch: it waits beside every rank for the whole run.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "launch_status.hpp"

namespace triax::cli {
namespace {

volatile sig_atomic_t g_rank_pid = 0;
void forward_to_rank(int signal_number) {
  if (g_rank_pid > 0) kill(static_cast<pid_t>(g_rank_pid), signal_number);
}

// What a rank may catch (general.preemption_signals, SIGINT from mpirun's job end) and SIGQUIT.
constexpr int kForwardedSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

// In the child: its own process group, SIGKILL when the parent dies, then COMMAND.
[[noreturn]] void exec_rank(const std::vector<std::string>& command, pid_t parent) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) std::_Exit(kExitFailure);  // the parent died before prctl took effect
  std::vector<char*> argv;
  for (const std::string& arg : command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  std::cerr << "triax launch: cannot run " << command[0] << ": " << std::strerror(errno) << "\n";
  std::_Exit(127);
}

// The child's wait status once it ended; the forwarded signals interrupt nothing (SA_RESTART).
int wait_for_rank(pid_t rank) {
  g_rank_pid = rank;
  struct sigaction forward {};
  forward.sa_handler = forward_to_rank;
  forward.sa_flags = SA_RESTART;
  sigemptyset(&forward.sa_mask);
  for (int signal_number : kForwardedSignals) sigaction(signal_number, &forward, nullptr);
  int status = 0;
  while (waitpid(rank, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// Forks COMMAND's process; its pid, or -1 (said on stderr).
pid_t start_rank(const std::vector<std::string>& command) {
  const pid_t parent = getpid();
  const pid_t rank = fork();
  if (rank < 0) std::cerr << "triax launch: fork failed: " << std::strerror(errno) << "\n";
  if (rank == 0) exec_rank(command, parent);
  return rank;
}

// The status to leave with, from the rank's wait status: a death by a signal is repeated (this
// process dies of it, recording nothing); an exit status is recorded unless the rank did.
int leave_as(int wait_status) {
  if (WIFSIGNALED(wait_status)) {
    signal(WTERMSIG(wait_status), SIG_DFL);
    raise(WTERMSIG(wait_status));
  }
  const int exit_status = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : kExitFailure;
  return rank_status_recorded() ? exit_status : record_exit_status(exit_status);
}

}  // namespace
}  // namespace triax::cli

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << triax::cli::kLaunchRankProgram
              << " COMMAND [ARGS...]: runs one rank of `triax launch` and records its exit status\n";
    return triax::cli::kExitInvalidConfig;
  }
  const pid_t rank = triax::cli::start_rank(std::vector<std::string>(argv + 1, argv + argc));
  if (rank < 0) return triax::cli::kExitFailure;
  return triax::cli::leave_as(triax::cli::wait_for_rank(rank));
}
