// The MPI state behind an MpiCommunicator (private to comm/src): the group communicators,
// polling of posted requests against the deadline, sends running in the background, collectives
// in flight, and the mapping of tensors and reduce ops onto MPI.
#pragma once

#include <ATen/core/Tensor.h>
#include <mpi.h>

#include <array>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "heartbeat.hpp"
#include "mpi_communicator.hpp"
#include "mpi_progress_thread.hpp"

namespace triax {
namespace mpi_detail {

constexpr int kGroupKinds = TRIAX_GROUP_EDP_CP + 1;

std::string mpi_error_text(int code);
std::string seconds_text(double seconds);
// The MPI type that moves a tensor's elements unchanged (half types travel as 16-bit words).
MPI_Datatype transfer_type(const at::Tensor& tensor, const char* operation);
MPI_Op mpi_op(triax_reduce_op op);
bool is_half_type(const at::Tensor& tensor);
// MPI has no 16-bit float arithmetic: reductions of bf16/fp16 run in fp32 (one rounding at the end).
at::Tensor reduction_buffer(const at::Tensor& tensor);
void finish_average(const at::Tensor& buffer, triax_reduce_op op, int group_size);
// Writes `result` into `target` unless they already share memory.
void write_back(const at::Tensor& target, const at::Tensor& result);
// An element count as MPI's int; refuses larger ones.
int element_count(int64_t elements, const char* operation);
inline int element_count(const at::Tensor& tensor, const char* operation) {
  return element_count(tensor.numel(), operation);
}
// Buffers of operations abandoned at a timeout: MPI may still write into them when the silent
// peer answers at last, so they are never freed.
void abandon(const std::vector<at::Tensor>& buffers);
// An input that shares memory with the output is copied first: MPI forbids overlapping buffers.
at::Tensor separate_input(const at::Tensor& input, const at::Tensor& output);

}  // namespace mpi_detail

struct MpiCommunicator::Impl {
  using Clock = std::chrono::steady_clock;

  ParallelContext context;
  CommunicatorOptions options;
  std::array<MPI_Comm, mpi_detail::kGroupKinds> comms;
  std::unique_ptr<Heartbeat> heartbeat;
  int64_t step = 0;
  bool failed = false;

  // Sends run in the background on a private copy of the tensor: two neighbours may both send
  // before they receive (1F1B's steady state), which blocking sends would deadlock on.
  struct PendingSend {
    at::Tensor buffer;
    MPI_Request request = MPI_REQUEST_NULL;
    std::string what;
    std::vector<int> suspect;
  };
  std::deque<PendingSend> pending_sends;
  // Drives the sends in flight while this rank computes (null when off or MPI lacks the level).
  std::unique_ptr<mpi_detail::MpiProgressThread> progress;

  void add_send(PendingSend send) {
    pending_sends.push_back(std::move(send));
    if (progress) progress->transfers_posted();
  }
  void forget_sends(int count) {
    if (progress && count > 0) progress->transfers_done(count);
  }

  // Forgets the sends that completed.
  void reap_sends() {
    for (auto it = pending_sends.begin(); it != pending_sends.end();) {
      int done = 0;
      const int code = MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
      if (code != MPI_SUCCESS) {
        abandon_sends();
        fail(it->what, "failed in MPI (" + mpi_detail::mpi_error_text(code) + ")", it->suspect);
      }
      if (!done) {
        ++it;
        continue;
      }
      it = pending_sends.erase(it);
      forget_sends(1);
    }
  }

  // Waits (with the usual deadline) until every background send has been delivered.
  void finish_sends() {
    while (!pending_sends.empty()) {
      PendingSend& send = pending_sends.front();
      try {
        wait(&send.request, 1, send.what, send.suspect, {send.buffer});
      } catch (...) {
        abandon_sends();
        throw;
      }
      pending_sends.pop_front();
      forget_sends(1);
    }
  }

  // After a failure MPI may still read the sends' buffers: they are never freed.
  void abandon_sends() {
    for (const PendingSend& send : pending_sends) mpi_detail::abandon({send.buffer});
    forget_sends(static_cast<int>(pending_sends.size()));
    pending_sends.clear();
  }

  Impl(const MeshShape& shape, int world_rank, const CommunicatorOptions& o) : context(shape, world_rank), options(o) {
    comms.fill(MPI_COMM_NULL);
  }

  MPI_Comm comm(triax_group group) const {
    if (static_cast<int>(group) < 0 || static_cast<int>(group) >= mpi_detail::kGroupKinds)
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "unknown process group " + std::to_string(static_cast<int>(group)));
    return comms[static_cast<size_t>(group)];
  }

  std::string step_label() const { return step > 0 ? "step " + std::to_string(step) : "before training"; }

  // "all_reduce over the dp group [0 2]" or "send to rank 3 (peer 1 of the pp group [1 3])"
  std::string describe(const char* operation, triax_group group, int peer = -1, const char* direction = "") const {
    const std::vector<int> members = context.members(group);
    const std::string group_text = std::string("the ") + group_name(group) + " group " + format_ranks(members);
    if (peer < 0) return std::string(operation) + " over " + group_text;
    return std::string(operation) + " " + direction + " rank " + std::to_string(members[peer]) + " (peer " +
           std::to_string(peer) + " of " + group_text + ")";
  }

  [[noreturn]] void fail(const std::string& what, const std::string& problem, const std::vector<int>& suspects) {
    failed = true;
    std::string message = step_label() + ": " + what + " " + problem;
    if (heartbeat) message += ": " + heartbeat->explain_silence(suspects);
    throw CommunicationError("rank " + std::to_string(context.world_rank()) + ": " + message);
  }

  void require_usable() const {
    if (failed)
      throw CommunicationError("rank " + std::to_string(context.world_rank()) +
                               ": the communicator failed earlier and cannot be used again");
  }

  // Polls the posted requests until they complete, an MPI error comes back, or the deadline.
  // `buffers`: the memory the requests read or write, kept alive if they are abandoned.
  void wait(MPI_Request* requests, int count, const std::string& what, const std::vector<int>& suspects,
            const std::vector<at::Tensor>& buffers, MPI_Status* statuses = MPI_STATUSES_IGNORE) {
    const auto started = Clock::now();
    const auto deadline = started + std::chrono::duration<double>(options.timeout_seconds);
    for (long polls = 0;; ++polls) {
      int done = 0;
      const int code = MPI_Testall(count, requests, &done, statuses);
      if (code != MPI_SUCCESS) {
        mpi_detail::abandon(buffers);
        fail(what, "failed in MPI (" + mpi_detail::mpi_error_text(code) + ")", suspects);
      }
      if (done) return;
      if (heartbeat)
        if (std::optional<std::string> peer = heartbeat->peer_failure()) {
          mpi_detail::abandon(buffers);
          failed = true;
          throw CommunicationError("rank " + std::to_string(context.world_rank()) + ": " + step_label() + ": " +
                                   what + " abandoned: " + *peer);
        }
      const auto now = Clock::now();
      if (now >= deadline) {
        mpi_detail::abandon(buffers);
        fail(what, "got no answer for " + mpi_detail::seconds_text(options.timeout_seconds), suspects);
      }
      // Spin briefly for low latency, then yield the core (ranks often outnumber cores).
      if (polls < 64) continue;
      if (now - started < std::chrono::milliseconds(2))
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  void post_or_fail(int code, const std::string& what, const std::vector<int>& suspects) {
    if (code != MPI_SUCCESS) fail(what, "could not start (" + mpi_detail::mpi_error_text(code) + ")", suspects);
  }

  void collective(triax_group group, const char* operation, const std::vector<at::Tensor>& buffers,
                  const std::function<int(MPI_Request*)>& post) {
    require_usable();
    MPI_Request request = MPI_REQUEST_NULL;
    const std::vector<int> members = context.members(group);
    const std::string what = describe(operation, group);
    post_or_fail(post(&request), what, members);
    wait(&request, 1, what, members, buffers);
  }

  // Posts a collective and returns it in flight. `post` gets room for two requests.
  std::unique_ptr<PendingOperation> start(triax_group group, const char* operation, std::vector<at::Tensor> buffers,
                                          const std::function<int(MPI_Request*)>& post, std::function<void()> finish);
};

// A posted collective (or a ring step's send and receive, two requests): `finish` (the fp32
// copy-back, the average) runs once it completes. Until then its buffers stay alive; dropped
// unfinished (after an error elsewhere), they are abandoned.
class MpiPendingOperation final : public PendingOperation {
 public:
  MpiPendingOperation(MpiCommunicator::Impl& impl, std::string what, std::vector<int> suspects,
                      std::vector<at::Tensor> buffers, std::function<void()> finish)
      : impl_(impl),
        what_(std::move(what)),
        suspects_(std::move(suspects)),
        buffers_(std::move(buffers)),
        finish_(std::move(finish)) {}
  ~MpiPendingOperation() override {
    if (!done_ && (requests_[0] != MPI_REQUEST_NULL || requests_[1] != MPI_REQUEST_NULL))
      mpi_detail::abandon(buffers_);
  }
  // Room for the requests it waits for: a collective posts one, a ring step two.
  MPI_Request* request() { return requests_.data(); }

  void wait() override {
    if (done_) return;
    impl_.require_usable();
    impl_.wait(requests_.data(), kRequests, what_, suspects_, buffers_);
    complete();
  }

  bool test() override {
    if (done_) return true;
    impl_.require_usable();
    int done = 0;
    const int code = MPI_Testall(kRequests, requests_.data(), &done, MPI_STATUSES_IGNORE);
    if (code != MPI_SUCCESS) {
      mpi_detail::abandon(buffers_);
      impl_.fail(what_, "failed in MPI (" + mpi_detail::mpi_error_text(code) + ")", suspects_);
    }
    if (done) complete();
    return done_;
  }

 private:
  static constexpr int kRequests = 2;  // MPI_Testall passes over null requests

  void complete() {
    requests_.fill(MPI_REQUEST_NULL);
    done_ = true;
    finish_();
  }

  MpiCommunicator::Impl& impl_;
  std::string what_;
  std::vector<int> suspects_;
  std::vector<at::Tensor> buffers_;
  std::function<void()> finish_;
  std::array<MPI_Request, kRequests> requests_{MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  bool done_ = false;
};

}  // namespace triax
