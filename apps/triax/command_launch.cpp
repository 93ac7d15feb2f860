// `triax launch -n N [--comm-timeout S] -- COMMAND...`: N local ranks of COMMAND under mpirun.
//
// mpirun runs with --enable-recovery, so that when one rank dies the others stay alive long
// enough to detect it and say which peer and step (by default mpirun would kill them at once,
// silently). Because mpirun then returns 0 although a rank failed, each rank's exit status goes
// into a folder given through TRIAX_LAUNCH_STATUS_DIR: a triax rank writes its own, and mpirun
// starts every rank through triax-launch-rank (launched_rank.cpp), which writes it for any other
// command; a rank that left none was killed. The launcher never runs LibTorch code: it
// forks and execs at once (libgomp is not fork safe). SIGTERM and SIGUSR1 reach every rank
// (preemption, docs/reliability.md).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "commands.hpp"
#include "launch_status.hpp"
#include "parsed_options.hpp"

namespace triax::cli {
namespace {

namespace fs = std::filesystem;

void print_launch_usage(std::ostream& out) {
  out << "usage: triax launch -n N [--comm-timeout SECONDS] -- COMMAND [ARGS...]\n\n"
         "Starts N ranks of COMMAND on this machine under mpirun (Open MPI), e.g.\n"
         "  triax launch -n 2 -- triax train --config configs/tiny_llama.yaml --set parallelism.dp=2\n"
         "Every rank gets MASTER_ADDR/MASTER_PORT, the same TRIAX_RUN_DATE (one run folder) and\n"
         "OMP_NUM_THREADS (cores / N unless set). --comm-timeout sets parallelism.comm_timeout_seconds.\n"
         "Exits 0 when every rank succeeded; otherwise with the status of the failure that caused the\n"
         "others: a rank's own error status (1 when a rank was killed), before the 4 of ranks that\n"
         "only lost a peer; the lowest rank first among several.\n";
}

// A port that was free a moment ago (the kernel's pick for port 0).
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 29500;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  int port = 29500;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0)
    port = ntohs(address.sin_port);
  close(fd);
  return port;
}

std::string run_date() {
  if (const char* fixed = std::getenv("TRIAX_RUN_DATE"); fixed && *fixed) return fixed;
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%d_%H%M%S", std::localtime(&now));
  return text;
}

std::string mpirun_program() {
  if (const char* program = std::getenv("TRIAX_MPIRUN"); program && *program) return program;
  return "mpirun";
}

pid_t g_child = -1;
volatile sig_atomic_t g_preemption_signal = 0;
void forward_signal(int signal_number) {
  if (g_child > 0) kill(g_child, signal_number);
}
void remember_signal(int signal_number) { g_preemption_signal = signal_number; }

// The processes whose parent is `parent` (mpirun's children on this machine: each rank's
// triax-launch-rank, which forwards the signal to its rank).
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> children;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const size_t end_of_name = line.rfind(')');  // "pid (comm) state ppid ..."
    if (end_of_name == std::string::npos) continue;
    std::istringstream fields(line.substr(end_of_name + 1));
    std::string state;
    pid_t ppid = 0;
    if (fields >> state >> ppid && ppid == parent) children.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return children;
}

// Copies mpirun's standard error (which carries the ranks' too) to ours line by line, without
// the `PMIX ERROR: BAD-PARAM ... pmix_event_notification.c` line that Open MPI 4.1's PMIx server
// prints under --enable-recovery for each rank that ends abnormally (a killed rank): the ranks'
// own messages already say what happened.
class StderrFilter {
 public:
  explicit StderrFilter(int fd) : fd_(fd) {}
  // Copies what arrives within `wait_ms` (and just waits once mpirun closed its end); true when
  // something came.
  bool pump(int wait_ms) {
    if (!open_) {
      poll(nullptr, 0, wait_ms);
      return false;
    }
    pollfd ready{fd_, POLLIN, 0};
    if (poll(&ready, 1, wait_ms) <= 0) return false;
    char chunk[4096];
    const ssize_t got = read(fd_, chunk, sizeof chunk);
    if (got <= 0) {
      open_ = got < 0 && errno == EINTR;
      return false;
    }
    pending_.append(chunk, static_cast<size_t>(got));
    for (size_t end; (end = pending_.find('\n')) != std::string::npos; pending_.erase(0, end + 1))
      emit(pending_.substr(0, end + 1));
    return true;
  }
  // After mpirun ended: what is left, until the pipe is quiet.
  void finish() {
    while (pump(10)) {
    }
    if (!pending_.empty()) emit(pending_);
    close(fd_);
  }

 private:
  void emit(const std::string& line) {
    if (line.find("PMIX ERROR: BAD-PARAM") != std::string::npos &&
        line.find("pmix_event_notification.c") != std::string::npos)
      return;
    std::cerr << line << std::flush;
  }
  int fd_;
  bool open_ = true;
  std::string pending_;
};

// Runs argv, waits for it, returns its exit status (128 + signal when killed). SIGTERM and SIGUSR1
// go to every rank directly, as Slurm delivers them: mpirun would turn a SIGTERM into killing the
// job, too fast for the ranks' preemption checkpoint. SIGINT goes to mpirun, which ends the job.
int run_and_wait(const std::vector<std::string>& argv) {
  std::vector<char*> raw;
  for (const auto& arg : argv) raw.push_back(const_cast<char*>(arg.c_str()));
  raw.push_back(nullptr);
  int error_pipe[2];
  if (pipe(error_pipe) != 0) {
    std::cerr << "triax launch: pipe failed: " << std::strerror(errno) << "\n";
    return kExitFailure;
  }
  const pid_t child = fork();
  if (child < 0) {
    std::cerr << "triax launch: fork failed: " << std::strerror(errno) << "\n";
    return kExitFailure;
  }
  if (child == 0) {
    dup2(error_pipe[1], STDERR_FILENO);
    close(error_pipe[0]);
    close(error_pipe[1]);
    execvp(raw[0], raw.data());
    std::cerr << "triax launch: cannot run " << argv[0] << ": " << std::strerror(errno)
              << " (install Open MPI's mpirun, or name it with TRIAX_MPIRUN)\n";
    std::_Exit(127);
  }
  close(error_pipe[1]);
  StderrFilter errors(error_pipe[0]);
  g_child = child;
  signal(SIGTERM, remember_signal);
  signal(SIGUSR1, remember_signal);
  signal(SIGINT, forward_signal);
  int status = 0;
  for (pid_t done = 0; done == 0 || (done < 0 && errno == EINTR);) {
    if (const int signal_number = g_preemption_signal) {
      g_preemption_signal = 0;
      for (pid_t rank : children_of(child)) kill(rank, signal_number);
    }
    done = waitpid(child, &status, WNOHANG);
    if (done == 0) errors.pump(100);
  }
  errors.finish();
  g_child = -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return kExitFailure;
}

// The options of `triax launch`, as given.
struct LaunchOptions {
  int ranks = 0;
  double comm_timeout = 0;  // seconds; 0: the config's
  std::vector<std::string> command;
};

Parsed<LaunchOptions> launch_usage_error(const std::string& problem) {
  std::cerr << "triax launch: " << problem << "\n";
  print_launch_usage(std::cerr);
  return Parsed<LaunchOptions>::leave(kExitInvalidConfig);
}

Parsed<LaunchOptions> parse_launch_options(const std::vector<std::string>& args) {
  LaunchOptions parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    auto value = [&](const char* name) -> std::string {
      if (i + 1 >= args.size()) throw std::invalid_argument(std::string(name) + " needs a value");
      return args[++i];
    };
    try {
      if (arg == "--") {
        parsed.command.assign(args.begin() + static_cast<long>(i) + 1, args.end());
        break;
      } else if (arg == "-h" || arg == "--help") {
        print_launch_usage(std::cout);
        return Parsed<LaunchOptions>::leave(kExitOk);
      } else if (arg == "-n" || arg == "--nproc") {
        parsed.ranks = std::stoi(value("-n"));
      } else if (arg == "--comm-timeout") {
        parsed.comm_timeout = std::stod(value("--comm-timeout"));
        if (!(parsed.comm_timeout > 0)) throw std::invalid_argument("--comm-timeout must be > 0 seconds");
      } else {
        throw std::invalid_argument("unknown option '" + arg + "' (the command goes after --)");
      }
    } catch (const std::exception& e) {
      return launch_usage_error(e.what());
    }
  }
  if (parsed.ranks < 1) return launch_usage_error("-n N (N >= 1) is required");
  if (parsed.command.empty()) return launch_usage_error("no command after --");
  return parsed;
}

// A fresh folder under TMPDIR for the ranks' exit statuses, or nothing (said on stderr).
std::optional<std::string> make_status_folder() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/triax-launch-XXXXXX";
  std::vector<char> folder_name(pattern.begin(), pattern.end());
  folder_name.push_back('\0');
  if (mkdtemp(folder_name.data()) == nullptr) {
    std::cerr << "triax launch: cannot create a status folder from " << pattern << ": " << std::strerror(errno) << "\n";
    return std::nullopt;
  }
  return std::string(folder_name.data());
}

// What every rank finds in its environment; mpirun passes the variables on (-x).
void set_rank_environment(const LaunchOptions& options, const std::string& status_folder) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const char* threads = std::getenv("OMP_NUM_THREADS");
  const std::string omp_threads =
      threads && *threads ? threads : std::to_string(std::max(1u, cores / static_cast<unsigned>(options.ranks)));
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(free_port()).c_str(), 1);
  setenv("TRIAX_RUN_DATE", run_date().c_str(), 1);
  setenv("OMP_NUM_THREADS", omp_threads.c_str(), 1);
  setenv(kStatusFolderVariable, status_folder.c_str(), 1);
  if (options.comm_timeout > 0) setenv(kCommTimeoutVariable, std::to_string(options.comm_timeout).c_str(), 1);
}

// mpirun's command line: each rank is `<launch_rank> COMMAND...`.
std::vector<std::string> mpirun_command_line(const LaunchOptions& options, const std::string& launch_rank) {
  std::vector<std::string> argv = {mpirun_program(), "-n", std::to_string(options.ranks), "--oversubscribe",
                                   "--enable-recovery"};
  if (geteuid() == 0) argv.push_back("--allow-run-as-root");
  for (const char* name :
       {"MASTER_ADDR", "MASTER_PORT", "TRIAX_RUN_DATE", "OMP_NUM_THREADS", kStatusFolderVariable, kCommTimeoutVariable})
    if (std::getenv(name) != nullptr) {
      argv.push_back("-x");
      argv.push_back(name);
    }
  argv.push_back(launch_rank);
  argv.insert(argv.end(), options.command.begin(), options.command.end());
  return argv;
}

// The launcher's status from each rank's own word; silence means it was killed or crashed. The
// status is the cause's, whatever the timing: a rank's own failure (1 for a killed one) comes
// before the 4 of the ranks that only saw a peer fail, the lowest rank first among several.
int launch_status(int ranks, const std::string& status_folder, int mpirun_status) {
  int cause = kExitOk, consequence = kExitOk;
  bool any_status = false;
  std::vector<int> killed;
  for (int rank = 0; rank < ranks; ++rank) {
    std::ifstream in(status_file(status_folder, rank));
    int status = 0;
    if (!(in >> status)) {
      killed.push_back(rank);
      if (cause == kExitOk) cause = kExitFailure;
      continue;
    }
    any_status = true;
    if (status == kExitOk) continue;
    std::cerr << "triax launch: rank " << rank << " exited with status " << status << "\n";
    int& slot = status == kExitCommunication ? consequence : cause;
    if (slot == kExitOk) slot = status;
  }
  if (!any_status) {
    // Not a triax command (or none of them got far): mpirun's status is all there is.
    if (mpirun_status != kExitOk)
      std::cerr << "triax launch: mpirun exited with status " << mpirun_status << " and no rank left a status\n";
    return mpirun_status;
  }
  for (int rank : killed) std::cerr << "triax launch: rank " << rank << " left no exit status (killed or crashed)\n";
  if (cause != kExitOk) return cause;
  if (consequence != kExitOk) return consequence;
  return mpirun_status;
}

// triax-launch-rank, beside this executable, or nothing (said on stderr).
std::optional<std::string> launch_rank_program() {
  std::error_code ec;
  const fs::path program = fs::read_symlink("/proc/self/exe", ec).parent_path() / kLaunchRankProgram;
  if (!ec && fs::exists(program, ec)) return program.string();
  std::cerr << "triax launch: cannot find " << kLaunchRankProgram << " beside the triax executable ("
            << (ec ? ec.message() : program.string() + " is missing") << ")\n";
  return std::nullopt;
}

int run_launch(const LaunchOptions& options) {
  const std::optional<std::string> launch_rank = launch_rank_program();
  if (!launch_rank) return kExitFailure;
  const std::optional<std::string> status_folder = make_status_folder();
  if (!status_folder) return kExitFailure;
  set_rank_environment(options, *status_folder);
  const int mpirun_status = run_and_wait(mpirun_command_line(options, *launch_rank));
  const int status = launch_status(options.ranks, *status_folder, mpirun_status);
  std::error_code ignored;
  fs::remove_all(*status_folder, ignored);
  return status;
}

}  // namespace

int run_launch_command(const std::vector<std::string>& args) {
  return run_parsed(parse_launch_options(args), run_launch);
}

}  // namespace triax::cli
