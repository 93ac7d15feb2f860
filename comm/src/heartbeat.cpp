// Heartbeats through c10d's TCPStore: key "triax/heartbeat/<rank>" holds "<step> <unix ms>".
// The ages compare the writer's clock with the reader's: exact on one node, and across nodes as
// good as their clock synchronisation (NTP keeps it far below the staleness threshold of seconds).
#include "heartbeat.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <thread>
#include <c10/util/Logging.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "triax/error.hpp"

namespace triax {
namespace {

using std::chrono::milliseconds;

int64_t unix_millis() {
  return std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string key_of(int rank) { return "triax/heartbeat/" + std::to_string(rank); }
// The run's first error, "<rank> <message>", and each rank's acknowledgement of it.
const std::string kFailureKey = "triax/failure";
std::string seen_key_of(int rank) { return "triax/failure_seen/" + std::to_string(rank); }

std::vector<uint8_t> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }

milliseconds to_millis(double seconds) { return milliseconds(static_cast<int64_t>(seconds * 1000.0)); }

// c10's messages carry a backtrace after the first line.
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", seconds);
  return text;
}

// A rank's last beat: its step and how long ago it was written.
struct Beat {
  int64_t step = 0;
  double age_seconds = 0;
};
Beat last_beat(c10d::Store& store, int rank) {
  const std::vector<uint8_t> raw = store.get(key_of(rank));
  std::istringstream value(std::string(raw.begin(), raw.end()));
  int64_t millis = 0;
  Beat beat;
  value >> beat.step >> millis;
  beat.age_seconds = static_cast<double>(unix_millis() - millis) / 1000.0;
  return beat;
}

// c10d logs a warning with a C++ backtrace for every failed store operation; once rank 0 is gone
// that is dozens of lines around the one message that explains what happened. Errors only,
// unless TORCH_CPP_LOG_LEVEL asks for more.
void quiet_c10d_warnings() {
  const char* level = std::getenv("TORCH_CPP_LOG_LEVEL");
  if (level == nullptr || *level == '\0') FLAGS_caffe2_log_level = std::max(FLAGS_caffe2_log_level, 2);
}

}  // namespace

struct Heartbeat::Impl {
  int rank = 0;
  int world_size = 1;
  std::string address;
  Options options;
  c10::intrusive_ptr<c10d::TCPStore> store;        // for reading the peers
  c10::intrusive_ptr<c10d::Store> beating_client;  // the thread's own connection
  std::atomic<int64_t> step{0};
  std::atomic<bool> peer_failed{false};
  std::string peer_failure;  // guarded by mutex; set once, before peer_failed
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::thread thread;

  // A beat older than this means a dead or hung rank.
  double stale_after() const { return std::max(2.0, 3 * options.interval_seconds); }

  // A store operation to a hung rank 0 gives up after this long.
  milliseconds operation_timeout() const {
    return std::max(milliseconds(5000), to_millis(4 * options.interval_seconds));
  }

  void beat() {
    const std::string value = std::to_string(step.load()) + " " + std::to_string(unix_millis());
    beating_client->set(key_of(rank), bytes_of(value));
  }

  // Reads the run's first error, if any, and acknowledges it (another rank's only).
  void watch_for_failure() {
    if (peer_failed.load() || !beating_client->check({kFailureKey})) return;
    const std::vector<uint8_t> raw = beating_client->get(kFailureKey);
    const std::string value(raw.begin(), raw.end());
    const size_t space = value.find(' ');
    const int failed_rank = std::atoi(value.substr(0, space).c_str());
    if (failed_rank == rank) return;
    beating_client->set(seen_key_of(rank), bytes_of("1"));
    std::lock_guard<std::mutex> lock(mutex);
    peer_failure = "rank " + std::to_string(failed_rank) + " stopped: " + value.substr(space + 1);
    peer_failed = true;
  }

  void run() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!stopping) {
      lock.unlock();
      try {
        beat();
        watch_for_failure();
      } catch (const std::exception&) {
        // Rank 0's store is gone (it finished or died): nobody can read this rank's beats any more,
        // and c10d would log every further attempt.
        return;
      }
      const int64_t published = step.load();
      std::this_thread::sleep_for(milliseconds(50));  // bounds the beat rate of fast steps
      lock.lock();
      wake.wait_for(lock, to_millis(options.interval_seconds), [&] { return stopping || step.load() != published; });
    }
  }

  void start() {
    beating_client = store->clone();  // connects within the connect timeout, like the store itself
    store->setTimeout(operation_timeout());
    beating_client->setTimeout(operation_timeout());
    beat();  // the first entry exists before anyone can wait on this rank
    thread = std::thread([this] { run(); });
  }
};

Heartbeat::Heartbeat(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

// Rank 0 serves the store (is_server), the others connect to it; both then start beating.
std::unique_ptr<Heartbeat> Heartbeat::connect(const std::string& address, uint16_t port, int rank, int world_size,
                                              const Options& options) {
  auto impl = std::make_unique<Impl>();
  impl->rank = rank;
  impl->world_size = world_size;
  impl->address = address;
  impl->options = options;
  c10d::TCPStoreOptions store_options;
  store_options.port = port;
  store_options.isServer = rank == 0;
  if (rank == 0) store_options.numWorkers = world_size;
  store_options.waitWorkers = false;
  store_options.timeout = to_millis(options.connect_timeout_seconds);
  quiet_c10d_warnings();
  try {
    impl->store = c10::make_intrusive<c10d::TCPStore>(address, store_options);
    impl->start();
  } catch (const std::exception& e) {
    if (rank == 0)
      throw Error("rank 0 cannot host the liveness store on " + address + ":" + std::to_string(port) + ": " +
                  first_line(e.what()));
    throw Error("rank " + std::to_string(rank) + " cannot reach rank 0's liveness store at " + address + ":" +
                std::to_string(port) + " within " + seconds_text(options.connect_timeout_seconds) + ": " +
                first_line(e.what()));
  }
  return std::unique_ptr<Heartbeat>(new Heartbeat(std::move(impl)));
}

std::unique_ptr<Heartbeat> Heartbeat::host(const std::string& address, uint16_t port, int world_size,
                                           const Options& options) {
  return connect(address, port, 0, world_size, options);
}

std::unique_ptr<Heartbeat> Heartbeat::join(const std::string& address, uint16_t port, int rank, int world_size,
                                           const Options& options) {
  return connect(address, port, rank, world_size, options);
}

Heartbeat::~Heartbeat() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

uint16_t Heartbeat::port() const { return impl_->store->getPort(); }

void Heartbeat::publish_failure(const std::string& message, double linger_seconds) {
  Impl& s = *impl_;
  try {
    // CommunicationErrors start with their rank already.
    const std::string own = "rank " + std::to_string(s.rank) + ": ";
    std::string text = first_line(message);
    if (text.rfind(own, 0) == 0) text = text.substr(own.size());
    const std::string value = std::to_string(s.rank) + " " + text;
    s.store->compareSet(kFailureKey, std::vector<uint8_t>{}, bytes_of(value));  // unless an error came first
    s.store->set(seen_key_of(s.rank), bytes_of("1"));  // rank 0 need not wait for this one
    if (s.rank != 0) return;
    // The others read this store: it stays up until each has seen the error or looks dead.
    const auto give_up = std::chrono::steady_clock::now() + to_millis(linger_seconds);
    for (int peer = 1; peer < s.world_size; ++peer) {
      if (!s.store->check({key_of(peer)})) continue;  // it never started
      while (!s.store->check({seen_key_of(peer)}) && std::chrono::steady_clock::now() < give_up) {
        if (last_beat(*s.store, peer).age_seconds > s.stale_after()) break;  // dead: it will not see it
        std::this_thread::sleep_for(milliseconds(20));
      }
    }
  } catch (const std::exception&) {
    // The store is gone or hung: the peers fall back to the timeout.
  }
}

std::optional<std::string> Heartbeat::peer_failure() const {
  if (!impl_->peer_failed.load()) return std::nullopt;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->peer_failure;
}

void Heartbeat::set_step(int64_t step) {
  // Published at the next beat, which comes early (at most every 50 ms) when the step changes.
  if (impl_->step.exchange(step) != step) impl_->wake.notify_all();
}

std::string Heartbeat::explain_silence(const std::vector<int>& ranks) const {
  const Impl& s = *impl_;
  const double stale_after = s.stale_after();
  const int64_t own_step = s.step.load();
  std::vector<std::string> dead, behind, alive;
  try {
    for (int rank : ranks) {
      if (rank == s.rank) continue;
      const std::string who = "rank " + std::to_string(rank);
      if (!s.store->check({key_of(rank)})) {
        dead.push_back(who + " never reported a heartbeat (it did not start)");
        continue;
      }
      const auto [step, age] = last_beat(*s.store, rank);
      if (age > stale_after)
        dead.push_back(who + " last seen " + seconds_text(age) + " ago at step " + std::to_string(step) +
                       " (dead or hung)");
      else if (step < own_step)
        behind.push_back(who + " is alive but still at step " + std::to_string(step) + " (slow or stuck)");
      else
        alive.push_back(who + " is alive at step " + std::to_string(step) + " (busy or waiting elsewhere)");
    }
    // Every peer here alive and behind none: they may all wait for a rank outside this group.
    if (dead.empty())
      for (int rank = 0; rank < s.world_size; ++rank) {
        if (rank == s.rank || std::find(ranks.begin(), ranks.end(), rank) != ranks.end()) continue;
        if (!s.store->check({key_of(rank)})) continue;
        const auto [step, age] = last_beat(*s.store, rank);
        if (age > stale_after)
          dead.push_back("rank " + std::to_string(rank) + " last seen " + seconds_text(age) + " ago at step " +
                         std::to_string(step) + " (dead or hung, outside this operation's group)");
      }
  } catch (const std::exception& e) {
    const std::string reason = first_line(e.what());
    return "rank 0's liveness store at " + s.address + ":" + std::to_string(s.store->getPort()) + " does not answer (" +
           reason + "): rank 0 is dead or hung";
  }
  // The likeliest culprits first; the alive ones only when nothing else explains the silence.
  std::vector<std::string> clauses = dead;
  clauses.insert(clauses.end(), behind.begin(), behind.end());
  if (clauses.empty()) clauses = alive;
  std::string text;
  for (const auto& clause : clauses) text += (text.empty() ? "" : "; ") + clause;
  return text.empty() ? "no peer to blame" : text;
}

}  // namespace triax
