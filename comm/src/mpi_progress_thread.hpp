// A thread that keeps MPI's point-to-point transfers moving while the main thread computes.
// Where Open MPI cannot copy between processes in one step (no CMA single copy, as in many
// containers), a large message moves through shared-memory fragments only while its sender is
// inside an MPI call: a rank that posts a send and then runs its next pass holds the receiver
// back until its next MPI call. This thread makes those calls for it, so that the transfer runs
// beside the pass: from the post of a send until the main thread sees it complete (it sleeps
// otherwise). It needs MPI_THREAD_MULTIPLE.
//
// TRIAX_MPI_PROGRESS_THREAD=0 turns it off (MPI is then initialised with MPI_THREAD_FUNNELED, as
// before); TRIAX_MPI_PROGRESS_POLL_US (default 20) is the pause between two progress calls.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace triax::mpi_detail {

class MpiProgressThread {
 public:
  // Whether the switch asks for the thread (read once per process).
  static bool requested();
  // The thread level to ask MPI_Init_thread for: MULTIPLE when the thread is requested.
  static int required_thread_level();
  // Whether this process's MPI gives the level the thread needs.
  static bool supported();

  // Starts the thread (idle until transfers_posted). Call from the thread that owns MPI.
  MpiProgressThread();
  // Stops and joins the thread, then retires its private request and communicator.
  ~MpiProgressThread();
  MpiProgressThread(const MpiProgressThread&) = delete;
  MpiProgressThread& operator=(const MpiProgressThread&) = delete;

  // The main thread posted `count` transfers / saw `count` of them complete: the thread drives
  // MPI while any is in flight and sleeps otherwise.
  void transfers_posted(int count = 1);
  void transfers_done(int count = 1);

 private:
  void run();

  MPI_Comm comm_ = MPI_COMM_NULL;  // private, so that its never-matched receive meets nothing
  MPI_Request request_ = MPI_REQUEST_NULL;
  int sink_ = 0;
  std::chrono::microseconds pause_;
  std::atomic<int> in_flight_{0};
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
  std::thread thread_;
};

}  // namespace triax::mpi_detail
