#include "triax/generate/text_tokenizer.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "tokenizer_bridge_source.hpp"  // kTokenizerBridgeSource, generated from tokenizer_bridge.py
#include "triax/error.hpp"

extern char** environ;

namespace triax::generation {
namespace {

using Json = nlohmann::json;

struct ProcessOutput {
  std::string out, err;
  int status = 0;
};

// Starts `argv` with the pipes' child ends as its stdin, stdout and stderr, and closes those ends
// here. Spawned at once: no fork of a process that ran LibTorch's thread pool.
pid_t spawn_with_pipes(const std::vector<std::string>& argv, int to_child[2], int from_child[2], int errors[2]) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, to_child[0], 0);
  posix_spawn_file_actions_adddup2(&actions, from_child[1], 1);
  posix_spawn_file_actions_adddup2(&actions, errors[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(to_child[0]);
  close(from_child[1]);
  close(errors[1]);
  if (spawned != 0) {
    close(to_child[1]);
    close(from_child[0]);
    close(errors[0]);
    throw Error("cannot start the tokenizer's Python '" + argv[0] + "': " + std::strerror(spawned) +
                " (run tools/setup.sh, or set TRIAX_PYTHON)");
  }
  return pid;
}

// Writes `input` to in_fd while draining out_fd and err_fd into `result`, until both are closed:
// neither side can block the other. Closes the three.
void feed_and_collect(int in_fd, int out_fd, int err_fd, const std::string& input, ProcessOutput& result) {
  size_t written = 0;
  if (input.empty()) {
    close(in_fd);
    in_fd = -1;
  }
  char buffer[65536];
  while (out_fd >= 0 || err_fd >= 0) {
    pollfd fds[3] = {{in_fd, POLLOUT, 0}, {out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
    if (poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (in_fd >= 0 && (fds[0].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t n = write(in_fd, input.data() + written, input.size() - written);
      if (n > 0) written += static_cast<size_t>(n);
      if (n < 0 || written == input.size()) {
        close(in_fd);
        in_fd = -1;
      }
    }
    for (int k = 1; k <= 2; ++k) {
      int& fd = k == 1 ? out_fd : err_fd;
      if (fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = read(fd, buffer, sizeof(buffer));
      if (n > 0) {
        (k == 1 ? result.out : result.err).append(buffer, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fd);
        fd = -1;
      }
    }
  }
  if (in_fd >= 0) close(in_fd);
}

// Starts `argv` with `input` on its stdin and collects stdout and stderr until it exits.
ProcessOutput run_process(const std::vector<std::string>& argv, const std::string& input) {
  int to_child[2], from_child[2], errors[2];
  if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(from_child, O_CLOEXEC) != 0 || pipe2(errors, O_CLOEXEC) != 0)
    throw Error(std::string("cannot create pipes for the tokenizer: ") + std::strerror(errno));
  const pid_t pid = spawn_with_pipes(argv, to_child, from_child, errors);
  // A child that exits before reading its input must not kill this process with SIGPIPE.
  struct sigaction ignore {
  }, previous{};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &previous);
  ProcessOutput result;
  feed_and_collect(to_child[1], from_child[0], errors[0], input, result);
  sigaction(SIGPIPE, &previous, nullptr);
  while (waitpid(pid, &result.status, 0) < 0 && errno == EINTR) {
  }
  return result;
}

Json call_bridge(const std::string& tokenizer, Json request) {
  request["tokenizer"] = tokenizer;
  const std::string python = TextTokenizer::python();
  const ProcessOutput run = run_process({python, "-c", kTokenizerBridgeSource}, request.dump());
  Json answer;
  try {
    answer = Json::parse(run.out);
  } catch (const Json::exception&) {
    throw Error("tokenizer " + tokenizer + ": the bridge (" + python + ") failed" +
                (WIFEXITED(run.status) ? " with status " + std::to_string(WEXITSTATUS(run.status)) : std::string()) +
                (run.err.empty() ? std::string() : ": " + run.err));
  }
  if (answer.contains("error")) throw Error("tokenizer: " + answer["error"].get<std::string>());
  return answer;
}

}  // namespace

TextTokenizer::TextTokenizer(std::string path) : path_(std::move(path)) {}

std::string TextTokenizer::python() {
  if (const char* chosen = std::getenv("TRIAX_PYTHON"); chosen != nullptr && *chosen) return chosen;
  return TRIAX_DEFAULT_PYTHON;
}

TextTokenizer::Encoded TextTokenizer::encode(const std::vector<std::string>& texts, bool add_special_tokens) const {
  const Json answer = call_bridge(path_, {{"encode", texts}, {"add_special_tokens", add_special_tokens}});
  Encoded out;
  out.ids = answer.at("ids").get<std::vector<std::vector<int64_t>>>();
  out.vocab_size = answer.at("vocab_size").get<int64_t>();
  out.eos = answer.at("eos").get<std::vector<int64_t>>();
  out.eos_token = answer.at("eos_token").get<std::string>();
  return out;
}

std::vector<std::string> TextTokenizer::decode(const std::vector<std::vector<int64_t>>& ids) const {
  return call_bridge(path_, {{"decode", ids}}).at("texts").get<std::vector<std::string>>();
}

}  // namespace triax::generation
