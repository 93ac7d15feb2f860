// Collective communication over the process mesh's groups. The core owns one Communicator per
// process; plugins reach it through the host services (triax_host), the trainer directly.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "triax/abi.h"
#include "triax/error.hpp"

namespace triax {

// A peer died, stopped answering within the timeout, or the transport failed. The message names
// the step, the operation, the group and the peer(s). The process cannot communicate any more:
// the command line prints the message and exits at once with its own status (see
// docs/architecture.md, "Timeouts"), without waiting in MPI_Finalize for ranks that are gone.
class CommunicationError : public Error {
 public:
  explicit CommunicationError(const std::string& message) : Error(TRIAX_ERROR_RUNTIME, message) {}
};

// How a multi-process communicator waits and watches its peers.
struct CommunicatorOptions {
  double timeout_seconds = 300;             // parallelism.comm_timeout_seconds: longest wait for a peer
  double heartbeat_interval_seconds = 0.5;  // how often each rank says it is alive
};

// A collective in flight. wait() returns once its result is in the caller's tensors, as the
// caller's CUDA stream sees them on the nccl backend (throwing CommunicationError on a timeout or
// a dead peer, like the blocking operations, or, on nccl, at the next settle()); test() says
// whether it has completed, finishing it if so, without blocking. The tensors handed to start_*
// must not be touched until then.
class PendingOperation {
 public:
  virtual ~PendingOperation() = default;
  virtual void wait() = 0;
  virtual bool test() = 0;
};

// What a backend without asynchronous collectives returns: the work is already done.
class CompletedOperation final : public PendingOperation {
 public:
  void wait() override {}
  bool test() override { return true; }
};

// The collectives every backend offers. The public operations check their arguments here, once
// for every backend (group, shapes, dtypes, peers, splits; the device through require_device),
// then hand over to the backend's run_* implementation.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual const char* backend_name() const = 0;
  virtual int rank(triax_group group) const = 0;
  virtual int size(triax_group group) const = 0;
  // The GPU this rank drives, as an index among its host's (the nccl backend's: the launcher's
  // local rank); 0 for a process started alone and for the backends that move CPU tensors.
  virtual int gpu_index() const { return 0; }
  void all_reduce(triax_group group, const at::Tensor& tensor, triax_reduce_op op);
  void all_gather(triax_group group, const at::Tensor& output, const at::Tensor& input);
  void reduce_scatter(triax_group group, const at::Tensor& output, const at::Tensor& input, triax_reduce_op op);
  void broadcast(triax_group group, const at::Tensor& tensor, int root);
  void all_to_all(triax_group group, const at::Tensor& output, const at::Tensor& input);
  // Variable splits along dim 0 (see triax_host.all_to_all_v): input_splits[j] rows go to rank j,
  // output_splits[j] rows come from rank j; one entry per rank of the group, either may be 0.
  void all_to_all_v(triax_group group, const at::Tensor& output, const at::Tensor& input,
                    const std::vector<int64_t>& output_splits, const std::vector<int64_t>& input_splits);
  void send(triax_group group, const at::Tensor& tensor, int peer);
  // Whether send returns at once and completes in the background, whatever the receiver does
  // (triax_engine_context.sends_buffered): the mpi backend's do; the nccl backend's are ordered on
  // the caller's stream and complete only once the receiver has reached its receive.
  virtual bool buffers_sends() const { return false; }
  void recv(triax_group group, const at::Tensor& tensor, int peer);
  void barrier(triax_group group);
  // Asynchronous forms of all_reduce, all_gather and reduce_scatter. By default they run the
  // blocking operation and return it completed; the mpi and nccl backends overlap them with the
  // caller's work.
  virtual bool has_asynchronous_collectives() const { return false; }
  std::unique_ptr<PendingOperation> start_all_reduce(triax_group group, const at::Tensor& tensor, triax_reduce_op op);
  std::unique_ptr<PendingOperation> start_all_gather(triax_group group, const at::Tensor& output,
                                                     const at::Tensor& input);
  std::unique_ptr<PendingOperation> start_reduce_scatter(triax_group group, const at::Tensor& output,
                                                         const at::Tensor& input, triax_reduce_op op);
  // One step of a ring: `send` goes to group rank send_peer while `recv` arrives from group rank
  // recv_peer, both posted together so that neither waits for the other (the peers may be the
  // same rank). Both tensors stay untouched until the operation is finished.
  std::unique_ptr<PendingOperation> start_send_recv(triax_group group, const at::Tensor& send, int send_peer,
                                                    const at::Tensor& recv, int recv_peer);
  // Returns once every operation issued so far has completed, throwing CommunicationError as a
  // blocking operation would when one got no answer within the timeout. The mpi backend's
  // operations have completed when they return; the nccl backend's only order the caller's CUDA
  // stream after them, so that the host keeps queueing kernels, and the trainer settles them once
  // a step.
  virtual void settle() {}
  // The training step in progress, for error messages and the peers' liveness reports.
  virtual void set_step(int64_t /*step*/) {}
  // True once an operation failed with a CommunicationError (a plugin may have turned it into
  // its own error status on the way): the process can only leave.
  virtual bool failed() const { return false; }
  // Tells the peers that this rank stops on `message`, so that their waiting operations give up
  // within seconds naming it; the timeout is left for silent deaths. Never throws.
  virtual void report_failure(const std::string& /*message*/) {}

 protected:
  // Throws, naming the operation and the tensor's role, when this backend cannot move `tensor`
  // where it lives (the mpi backend moves CPU tensors, nccl CUDA ones).
  virtual void require_device(const at::Tensor& /*tensor*/, const char* /*operation*/, const char* /*role*/) const {}

  // The backend's operations, called with checked arguments.
  virtual void run_all_reduce(triax_group group, const at::Tensor& tensor, triax_reduce_op op) = 0;
  virtual void run_all_gather(triax_group group, const at::Tensor& output, const at::Tensor& input) = 0;
  virtual void run_reduce_scatter(triax_group group, const at::Tensor& output, const at::Tensor& input,
                                  triax_reduce_op op) = 0;
  virtual void run_broadcast(triax_group group, const at::Tensor& tensor, int root) = 0;
  virtual void run_all_to_all(triax_group group, const at::Tensor& output, const at::Tensor& input) = 0;
  virtual void run_all_to_all_v(triax_group group, const at::Tensor& output, const at::Tensor& input,
                                const std::vector<int64_t>& output_splits,
                                const std::vector<int64_t>& input_splits) = 0;
  virtual void run_send(triax_group group, const at::Tensor& tensor, int peer) = 0;
  virtual void run_recv(triax_group group, const at::Tensor& tensor, int peer) = 0;
  virtual void run_barrier(triax_group group) = 0;
  virtual std::unique_ptr<PendingOperation> run_start_all_reduce(triax_group group, const at::Tensor& tensor,
                                                                 triax_reduce_op op) {
    run_all_reduce(group, tensor, op);
    return std::make_unique<CompletedOperation>();
  }
  virtual std::unique_ptr<PendingOperation> run_start_all_gather(triax_group group, const at::Tensor& output,
                                                                 const at::Tensor& input) {
    run_all_gather(group, output, input);
    return std::make_unique<CompletedOperation>();
  }
  virtual std::unique_ptr<PendingOperation> run_start_reduce_scatter(triax_group group, const at::Tensor& output,
                                                                     const at::Tensor& input, triax_reduce_op op) {
    run_reduce_scatter(group, output, input, op);
    return std::make_unique<CompletedOperation>();
  }
  virtual std::unique_ptr<PendingOperation> run_start_send_recv(triax_group group, const at::Tensor& send,
                                                                int send_peer, const at::Tensor& recv,
                                                                int recv_peer) = 0;

 private:
  void require_group(triax_group group, const char* operation) const;
  void require_tensor(const at::Tensor& tensor, const char* operation, const char* role) const;
  void require_pair(const at::Tensor& output, const at::Tensor& input, const char* operation) const;
  void require_all_gather(triax_group group, const at::Tensor& output, const at::Tensor& input) const;
  void require_peer(triax_group group, int peer, const char* operation) const;
};

// The world of one process: every group holds just this rank, so reductions and gathers are
// copies and there is no peer to send to.
// (The base's checks refuse every peer and every root but 0.)
class SingleProcessCommunicator final : public Communicator {
 public:
  const char* backend_name() const override { return "single-process"; }
  int rank(triax_group) const override { return 0; }
  int size(triax_group) const override { return 1; }

 protected:
  void run_all_reduce(triax_group, const at::Tensor&, triax_reduce_op) override {}
  void run_all_gather(triax_group, const at::Tensor& output, const at::Tensor& input) override;
  void run_reduce_scatter(triax_group, const at::Tensor& output, const at::Tensor& input, triax_reduce_op) override;
  void run_broadcast(triax_group, const at::Tensor&, int) override {}
  void run_all_to_all(triax_group, const at::Tensor& output, const at::Tensor& input) override;
  void run_all_to_all_v(triax_group, const at::Tensor& output, const at::Tensor& input, const std::vector<int64_t>&,
                        const std::vector<int64_t>&) override;
  void run_send(triax_group, const at::Tensor&, int) override {}
  void run_recv(triax_group, const at::Tensor&, int) override {}
  void run_barrier(triax_group) override {}
  // Never called: the base's checks find no peer in a world of one.
  std::unique_ptr<PendingOperation> run_start_send_recv(triax_group, const at::Tensor&, int, const at::Tensor&,
                                                        int) override {
    return std::make_unique<CompletedOperation>();
  }
};

// The C host-services table (handed to every plugin) backed by a Communicator and the core's log.
class HostServices {
 public:
  explicit HostServices(Communicator& communicator);
  const triax_host* c_host() const { return &host_; }
  Communicator& communicator() const { return communicator_; }

 private:
  Communicator& communicator_;
  triax_host host_{};
};

}  // namespace triax
