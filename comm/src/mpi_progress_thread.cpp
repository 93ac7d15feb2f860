#include "mpi_progress_thread.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "triax/environment_switch.hpp"

namespace triax::mpi_detail {
namespace {

std::chrono::microseconds poll_pause() {
  const char* text = std::getenv("TRIAX_MPI_PROGRESS_POLL_US");
  if (!text || !*text) return std::chrono::microseconds(20);
  return std::chrono::microseconds(std::max(0L, std::strtol(text, nullptr, 10)));
}

}  // namespace

bool MpiProgressThread::requested() {
  static const bool on = switched_on_unless_zero("TRIAX_MPI_PROGRESS_THREAD");
  return on;
}

int MpiProgressThread::required_thread_level() { return requested() ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED; }

bool MpiProgressThread::supported() {
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  return provided == MPI_THREAD_MULTIPLE;
}

MpiProgressThread::MpiProgressThread() : pause_(poll_pause()) {
  // A receive that nothing ever matches: testing it is a progress call that touches no request
  // of the main thread (two threads must not test one request).
  MPI_Comm_dup(MPI_COMM_SELF, &comm_);
  MPI_Irecv(&sink_, 1, MPI_INT, 0, 0, comm_, &request_);
  thread_ = std::thread([this] { run(); });
}

MpiProgressThread::~MpiProgressThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
  MPI_Cancel(&request_);
  MPI_Wait(&request_, MPI_STATUS_IGNORE);
  MPI_Comm_free(&comm_);
}

void MpiProgressThread::transfers_posted(int count) {
  if (in_flight_.fetch_add(count) > 0) return;
  std::lock_guard<std::mutex> lock(mutex_);  // the thread may be between its check and its wait
  wake_.notify_one();
}

void MpiProgressThread::transfers_done(int count) { in_flight_.fetch_sub(count); }

void MpiProgressThread::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || in_flight_ > 0; });
    if (stop_) return;
    lock.unlock();
    // Errors are the main thread's to report: its own calls on the failed requests return them.
    while (in_flight_ > 0 && !stop_) {
      int done = 0;
      MPI_Test(&request_, &done, MPI_STATUS_IGNORE);
      if (pause_.count() > 0)
        std::this_thread::sleep_for(pause_);
      else
        std::this_thread::yield();
    }
    lock.lock();
  }
}

}  // namespace triax::mpi_detail
