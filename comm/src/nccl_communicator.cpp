// The `nccl` backend over c10d's ProcessGroupNCCL. CPU builds compile only the refusal below.
//
// Rendezvous: rank 0 hosts a TCPStore on MASTER_ADDR:MASTER_PORT (torchrun and `triax launch` set
// them); every group of the mesh this rank belongs to gets a ProcessGroupNCCL over its own
// PrefixStore ("triax/<kind>/<group index>"), so the groups' NCCL unique ids never collide.
// Liveness: the heartbeat store listens on MASTER_PORT + 1.
// Waiting: an operation returns once the caller's CUDA stream is ordered after it (Work::wait()
// without a timeout); the host does not wait for the GPU, so it keeps the GPU's queue full. Each
// operation stays in `in_flight_` until it is seen completed: settle() (once a training step)
// waits for all of them, at most the timeout, and throws a CommunicationError naming the
// operation and the peers' state, as a blocking wait would. ProcessGroupNCCL's own watchdog, at
// twice the timeout, ends the process on a collective nobody settles.
#include "nccl_communicator.hpp"

#include "triax/error.hpp"

#ifdef TRIAX_WITH_CUDA
#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL
#endif
#include <ATen/ATen.h>
#include <c10/cuda/CUDAFunctions.h>

#include <array>
#include <chrono>
#include <deque>
#include <optional>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "heartbeat.hpp"
#endif

namespace triax {

#ifndef TRIAX_WITH_CUDA

std::unique_ptr<Communicator> make_nccl_communicator(const MeshShape&, const CommunicatorOptions&,
                                                     const LaunchEnvironment&) {
  throw ConfigError(
      "parallelism.comm_backend: nccl is not available in this triax build (configure with -DTRIAX_CUDA=ON); "
      "use mpi on CPUs");
}

#else

namespace {

constexpr int kGroupKinds = TRIAX_GROUP_EDP_CP + 1;

c10d::ReduceOp reduce_op(triax_reduce_op op) {
  switch (op) {
    case TRIAX_REDUCE_SUM:
      return c10d::ReduceOp::SUM;
    case TRIAX_REDUCE_AVG:
      return c10d::ReduceOp::AVG;
    case TRIAX_REDUCE_MAX:
      return c10d::ReduceOp::MAX;
    case TRIAX_REDUCE_MIN:
      return c10d::ReduceOp::MIN;
  }
  throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "unknown reduce op " + std::to_string(static_cast<int>(op)));
}

// all_reduce, all_gather and reduce_scatter also come in asynchronous forms (c10d's Work objects
// are asynchronous already), so that the data-parallel bucket reductions overlap the backward
// and the tensor-parallel layers' collectives their GEMMs.
class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const MeshShape& shape, const CommunicatorOptions& options, const LaunchEnvironment& launch)
      : context_(shape, launch.rank), options_(options) {
    if (launch.master_address.empty() || launch.master_port == 0)
      throw ConfigError(
          "the nccl backend needs MASTER_ADDR and MASTER_PORT (set by torchrun and `triax launch`; with srun, "
          "export them from the first node)");
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(launch.local_rank));
    device_ = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(launch.local_rank));
    const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(options.timeout_seconds * 1000));

    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<uint16_t>(launch.master_port);
    store_options.isServer = launch.rank == 0;
    store_options.numWorkers = launch.world_size;
    store_options.timeout = timeout;
    auto store = c10::make_intrusive<c10d::TCPStore>(launch.master_address, store_options);

    Heartbeat::Options beat;
    beat.interval_seconds = options.heartbeat_interval_seconds;
    beat.connect_timeout_seconds = options.timeout_seconds;
    const auto beat_port = static_cast<uint16_t>(launch.master_port + 1);
    heartbeat_ = launch.rank == 0
                     ? Heartbeat::host(launch.master_address, beat_port, launch.world_size, beat)
                     : Heartbeat::join(launch.master_address, beat_port, launch.rank, launch.world_size, beat);

    for (int kind = 0; kind < kGroupKinds; ++kind) {
      const auto group = static_cast<triax_group>(kind);
      auto pg_options = c10d::ProcessGroupNCCL::Options::create();
      pg_options->timeout = 2 * timeout;  // the backstop: settle() reports first, naming the peers
      auto prefixed = c10::make_intrusive<c10d::PrefixStore>(
          std::string("triax/") + group_name(group) + "/" + std::to_string(context_.group_index(group)), store);
      groups_[kind] =
          c10::make_intrusive<c10d::ProcessGroupNCCL>(prefixed, context_.rank(group), context_.size(group), pg_options);
    }
  }

  const char* backend_name() const override { return "nccl"; }
  int rank(triax_group group) const override { return context_.rank(group); }
  int size(triax_group group) const override { return context_.size(group); }
  bool failed() const override { return failed_; }
  void report_failure(const std::string& message) override { heartbeat_->publish_failure(message); }

  void settle() override {
    const auto deadline = std::chrono::steady_clock::now() + timeout();
    while (!in_flight_.empty()) settle_oldest(deadline);
  }

  void set_step(int64_t step) override {
    step_ = step;
    heartbeat_->set_step(step);
  }

  int gpu_index() const override { return device_.index(); }

  // The base class has checked the arguments (Communicator::all_reduce, ...).
 protected:
  void require_device(const at::Tensor& tensor, const char* operation, const char* role) const override {
    if (!tensor.is_cuda())
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, std::string(operation) + ": the nccl backend moves CUDA tensors, the " +
                                                    role + " is on " + tensor.device().str() +
                                                    " (use parallelism.comm_backend: mpi for CPU tensors)");
  }

  bool has_asynchronous_collectives() const override { return true; }

  void run_all_reduce(triax_group group, const at::Tensor& tensor, triax_reduce_op op) override {
    run_start_all_reduce(group, tensor, op)->wait();
  }

  std::unique_ptr<PendingOperation> run_start_all_reduce(triax_group group, const at::Tensor& tensor,
                                                         triax_reduce_op op) override {
    std::vector<at::Tensor> buffers{tensor.contiguous()};
    c10d::AllreduceOptions opts;
    opts.reduceOp = reduce_op(op);
    auto work = pg(group).allreduce(buffers, opts);
    return std::make_unique<Pending>(*this, std::move(work), tensor, buffers[0], "all_reduce", group);
  }

  void run_all_gather(triax_group group, const at::Tensor& output, const at::Tensor& input) override {
    run_start_all_gather(group, output, input)->wait();
  }

  std::unique_ptr<PendingOperation> run_start_all_gather(triax_group group, const at::Tensor& output,
                                                         const at::Tensor& input) override {
    at::Tensor out = output.contiguous();
    at::Tensor in = input.is_alias_of(output) ? input.clone() : input.contiguous();
    auto work = pg(group)._allgather_base(out, in);
    return std::make_unique<Pending>(*this, std::move(work), output, out, "all_gather", group);
  }

  void run_reduce_scatter(triax_group group, const at::Tensor& output, const at::Tensor& input,
                          triax_reduce_op op) override {
    run_start_reduce_scatter(group, output, input, op)->wait();
  }

  std::unique_ptr<PendingOperation> run_start_reduce_scatter(triax_group group, const at::Tensor& output,
                                                             const at::Tensor& input, triax_reduce_op op) override {
    at::Tensor out = output.contiguous();
    at::Tensor in = input.is_alias_of(output) ? input.clone() : input.contiguous();
    c10d::ReduceScatterOptions opts;
    opts.reduceOp = reduce_op(op);
    auto work = pg(group)._reduce_scatter_base(out, in, opts);
    return std::make_unique<Pending>(*this, std::move(work), output, out, "reduce_scatter", group);
  }

  void run_broadcast(triax_group group, const at::Tensor& tensor, int root) override {
    std::vector<at::Tensor> buffers{tensor.contiguous()};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    wait(pg(group).broadcast(buffers, opts), "broadcast", group);
    if (!buffers[0].is_same(tensor)) tensor.copy_(buffers[0]);
  }

  void run_all_to_all(triax_group group, const at::Tensor& output, const at::Tensor& input) override {
    std::vector<int64_t> equal_splits;  // empty: equal dim-0 splits
    exchange(group, output, input, equal_splits, equal_splits, "all_to_all");
  }

  void run_all_to_all_v(triax_group group, const at::Tensor& output, const at::Tensor& input,
                        const std::vector<int64_t>& output_splits, const std::vector<int64_t>& input_splits) override {
    std::vector<int64_t> out_splits = output_splits, in_splits = input_splits;  // c10d takes them by reference
    exchange(group, output, input, out_splits, in_splits, "all_to_all_v");
  }

  void run_send(triax_group group, const at::Tensor& tensor, int peer) override {
    std::vector<at::Tensor> buffers{tensor.contiguous()};
    wait(pg(group).send(buffers, peer, 0), "send to", group, peer);
  }

  void run_recv(triax_group group, const at::Tensor& tensor, int peer) override {
    std::vector<at::Tensor> buffers{tensor.contiguous()};
    wait(pg(group).recv(buffers, peer, 0), "recv from", group, peer);
    if (!buffers[0].is_same(tensor)) tensor.copy_(buffers[0]);
  }

  // ncclSend and ncclRecv in one NCCL group (c10d's coalescing): posted one after the other, two
  // neighbours that both send first would wait for each other's receive.
  std::unique_ptr<PendingOperation> run_start_send_recv(triax_group group, const at::Tensor& send, int send_peer,
                                                        const at::Tensor& recv, int recv_peer) override {
    std::vector<at::Tensor> sent{send.is_alias_of(recv) ? send.clone() : send.contiguous()};
    std::vector<at::Tensor> received{recv.contiguous()};
    c10d::ProcessGroupNCCL& ring = pg(group);
    ring.startCoalescing();
    ring.send(sent, send_peer, 0);
    ring.recv(received, recv_peer, 0);
    auto work = ring.endCoalescing();
    return std::make_unique<Pending>(*this, std::move(work), recv, received[0], "send_recv", group);
  }

  void run_barrier(triax_group group) override {
    c10d::BarrierOptions opts;
    opts.device = device_;
    wait(pg(group).barrier(opts), "barrier", group);
    settle();  // a barrier is the host's: every rank has reached it, within the timeout
  }

 private:
  // A collective in flight, finished as the blocking operations are: the timeout, the error naming
  // the group and the peers' state, the copy into a result that was not contiguous.
  class Pending final : public PendingOperation {
   public:
    Pending(NcclCommunicator& owner, c10::intrusive_ptr<c10d::Work> work, at::Tensor result, at::Tensor staged,
            const char* operation, triax_group group)
        : owner_(owner),
          work_(std::move(work)),
          result_(std::move(result)),
          staged_(std::move(staged)),
          operation_(operation),
          group_(group) {}

    void wait() override {
      if (done_) return;
      done_ = true;  // a failure is reported once
      owner_.wait(work_, operation_, group_);
      if (!staged_.is_same(result_)) result_.copy_(staged_);
    }
    bool test() override {
      if (!done_ && !work_->isCompleted()) return false;
      wait();
      return true;
    }

   private:
    NcclCommunicator& owner_;
    c10::intrusive_ptr<c10d::Work> work_;
    at::Tensor result_, staged_;
    const char* operation_;
    triax_group group_;
    bool done_ = false;
  };

  c10d::ProcessGroupNCCL& pg(triax_group group) const {
    if (static_cast<int>(group) < 0 || static_cast<int>(group) >= kGroupKinds)
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "unknown process group " + std::to_string(static_cast<int>(group)));
    return *groups_[group];
  }

  // c10d's all-to-all: equal dim-0 splits when both split lists are empty.
  void exchange(triax_group group, const at::Tensor& output, const at::Tensor& input, std::vector<int64_t>& output_splits,
                std::vector<int64_t>& input_splits, const char* operation) {
    at::Tensor out = output.contiguous();
    at::Tensor in = input.is_alias_of(output) ? input.clone() : input.contiguous();
    wait(pg(group).alltoall_base(out, in, output_splits, input_splits), operation, group);
    if (!out.is_same(output)) output.copy_(out);
  }

  // What an operation left to settle() names when it fails.
  struct Issued {
    c10::intrusive_ptr<c10d::Work> work;
    const char* operation;
    triax_group group;
    int peer;  // -1: the whole group
  };
  static constexpr size_t kMostInFlight = 4096;  // beyond, the oldest is waited for (bounded memory)

  std::chrono::milliseconds timeout() const {
    return std::chrono::milliseconds(static_cast<int64_t>(options_.timeout_seconds * 1000));
  }

  // Orders the current stream after `work` and keeps it until it is seen completed. The
  // operations completed meanwhile are finished here, so that an error surfaces at the next call.
  void wait(const c10::intrusive_ptr<c10d::Work>& work, const char* operation, triax_group group, int peer = -1) {
    Issued issued{work, operation, group, peer};
    try {
      work->wait();
    } catch (const std::exception& e) {
      throw failure(issued, e.what());
    }
    in_flight_.push_back(std::move(issued));
    while (!in_flight_.empty() && in_flight_.front().work->isCompleted()) finish_oldest();
    if (in_flight_.size() > kMostInFlight) settle_oldest(std::chrono::steady_clock::now() + timeout());
  }

  // Polls the oldest operation until it has completed (a short sleep: the GPU usually has little
  // left of the step) and finishes it; throws once `deadline` has passed.
  void settle_oldest(std::chrono::steady_clock::time_point deadline) {
    while (!in_flight_.front().work->isCompleted()) {
      if (std::optional<std::string> peer = heartbeat_->peer_failure())
        throw failure(in_flight_.front(), "abandoned: " + *peer, false);
      if (std::chrono::steady_clock::now() > deadline) throw failure(in_flight_.front(), "still running");
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    finish_oldest();
  }

  // The oldest operation has completed: an error NCCL recorded for it is thrown here.
  void finish_oldest() {
    Issued oldest = std::move(in_flight_.front());
    in_flight_.pop_front();
    try {
      oldest.work->wait(timeout());  // returns at once (completed), rethrowing its exception if any
    } catch (const std::exception& e) {
      throw failure(oldest, e.what());
    }
  }

  // The error of a failed operation: NCCL's `cause`, or the timeout, with the suspects' state; or
  // `cause` alone when another rank reported its error. `issued` may be one of in_flight_, all
  // dropped afterwards: the process can only leave.
  CommunicationError failure(const Issued& issued, const std::string& cause, bool explain = true) {
    const std::vector<int> members = context_.members(issued.group);
    const std::vector<int> suspects = issued.peer < 0 ? members : std::vector<int>{members[issued.peer]};
    const std::string what = std::string(issued.operation) +
                             (issued.peer < 0 ? " over the " : " rank " + std::to_string(members[issued.peer]) + " of the ") +
                             group_name(issued.group) + " group " + format_ranks(members);
    const std::string reason = cause.substr(0, cause.find('\n'));
    const std::string happened = explain ? " failed or got no answer within " + std::to_string(options_.timeout_seconds) +
                                               " s (" + reason + "): " + heartbeat_->explain_silence(suspects)
                                         : " " + reason;
    CommunicationError error("rank " + std::to_string(context_.world_rank()) + ": step " + std::to_string(step_) + ": " +
                             what + happened);
    failed_ = true;
    in_flight_.clear();
    return error;
  }

  ParallelContext context_;
  CommunicatorOptions options_;
  at::Device device_{at::kCUDA, 0};
  std::unique_ptr<Heartbeat> heartbeat_;
  std::array<c10::intrusive_ptr<c10d::ProcessGroupNCCL>, kGroupKinds> groups_;
  int64_t step_ = 0;
  std::deque<Issued> in_flight_;  // issued order
  bool failed_ = false;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(const MeshShape& shape, const CommunicatorOptions& options,
                                                     const LaunchEnvironment& launch) {
  return std::make_unique<NcclCommunicator>(shape, options, launch);
}

#endif

}  // namespace triax
