// Liveness of the ranks. A background thread of every rank writes its training step and the time
// into a key-value store that rank 0 hosts (c10d's TCPStore) about twice a second. When an
// operation gets no answer, the waiting rank reads its peers' entries and can say which of them
// is dead or hung (stale entry), merely behind (older step), or alive and elsewhere.
//
// The store also carries the first error of the run: a rank that stops on an error publishes it,
// every other rank's thread sees it at its next beat (and acknowledges it), and their waiting
// operations give up at once naming that error, instead of waiting out the timeout.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace triax {

class Heartbeat {
 public:
  struct Options {
    double interval_seconds = 0.5;
    double connect_timeout_seconds = 60;  // how long a rank tries to reach rank 0's store
  };

  // Rank 0: hosts the store on `port` (0 takes any free port; port() tells which) and beats.
  static std::unique_ptr<Heartbeat> host(const std::string& address, uint16_t port, int world_size,
                                         const Options& options);
  // Every other rank: connects to rank 0's store and beats.
  static std::unique_ptr<Heartbeat> join(const std::string& address, uint16_t port, int rank, int world_size,
                                         const Options& options);
  ~Heartbeat();  // stops the beating thread (within one store timeout)

  uint16_t port() const;
  void set_step(int64_t step);

  // Why the given world ranks may not have answered, one clause per rank that looks dead, stalled
  // or behind ("rank 2 last seen 9.6 s ago at step 6 (dead or hung)"), a dead rank elsewhere when
  // all of them look alive, or that rank 0's store is unreachable. Never throws and returns within
  // a few seconds.
  std::string explain_silence(const std::vector<int>& ranks) const;

  // Publishes this rank's error unless another one came first (the first error wins). Rank 0,
  // whose store the others read, then waits until every other rank has seen it or looks dead,
  // at most `linger_seconds`. Never throws.
  void publish_failure(const std::string& message, double linger_seconds = 5.0);
  // "rank 2 stopped: <its message>" once another rank published an error; read at every beat.
  std::optional<std::string> peer_failure() const;

 private:
  struct Impl;
  explicit Heartbeat(std::unique_ptr<Impl> impl);
  static std::unique_ptr<Heartbeat> connect(const std::string& address, uint16_t port, int rank, int world_size,
                                            const Options& options);
  std::unique_ptr<Impl> impl_;
};

}  // namespace triax
