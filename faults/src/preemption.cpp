#include "triax/faults/preemption.hpp"

#include <atomic>
#include <csignal>
#include <cstring>
#include <unistd.h>

#include "triax/error.hpp"

namespace triax::preemption {
namespace {

// Written by the handler, read by the training loop and the checkpoint writer.
std::atomic<int> g_first_signal{0};
std::atomic<int> g_signal_count{0};

struct NamedSignal {
  const char* name;
  int number;
};
constexpr NamedSignal kSignals[] = {{"SIGTERM", SIGTERM}, {"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2},
                                    {"SIGINT", SIGINT},   {"SIGHUP", SIGHUP}};

// Async-signal-safe: atomics and write(2) only.
void on_signal(int number) {
  int none = 0;
  g_first_signal.compare_exchange_strong(none, number);
  const int count = g_signal_count.fetch_add(1) + 1;
  const char* text = count == 1 ? "triax: preemption signal received: stopping at the next step boundary with a "
                                  "checkpoint\n"
                                : "triax: second preemption signal: aborting the checkpoint save under way\n";
  [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, text, std::strlen(text));
}

}  // namespace

SignalWatch::SignalWatch(const std::vector<std::string>& signal_names) {
  for (const std::string& name : signal_names) {
    const int number = signal_number(name);
    if (number == 0) throw Error("general.preemption_signals: unknown signal '" + name + "'");
    signals_.push_back(number);
    previous_.push_back(std::signal(number, on_signal));
  }
}

SignalWatch::~SignalWatch() {
  for (size_t i = 0; i < signals_.size(); ++i) std::signal(signals_[i], previous_[i]);
}

int signal_received() { return g_first_signal.load(); }
bool abort_requested() { return g_signal_count.load() >= 2; }

void reset() {
  g_first_signal = 0;
  g_signal_count = 0;
}

std::string signal_name(int signal_number) {
  for (const NamedSignal& s : kSignals)
    if (s.number == signal_number) return s.name;
  return "signal " + std::to_string(signal_number);
}

int signal_number(const std::string& name) {
  for (const NamedSignal& s : kSignals)
    if (name == s.name) return s.number;
  return 0;
}

}  // namespace triax::preemption
