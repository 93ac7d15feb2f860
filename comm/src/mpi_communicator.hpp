// The `mpi` backend: a Communicator over Open MPI for CPU tensors, one MPI communicator per group
// kind of the mesh. Every operation is non-blocking underneath and polled against a deadline, so
// a dead or hung peer turns into a CommunicationError naming the step, the group and the peer
// instead of a hang. Runs under mpirun or srun (MPI is initialised on first use).
#pragma once

#include <memory>

#include "triax/core/comm/communicator.hpp"
#include "triax/core/comm/parallel_context.hpp"

namespace triax {

class MpiCommunicator final : public Communicator {
 public:
  // Collective over MPI_COMM_WORLD: every rank builds its communicator with the same shape.
  // Throws ConfigError when the shape's world size differs from the number of MPI processes.
  explicit MpiCommunicator(const MeshShape& shape, const CommunicatorOptions& options = {});
  // Stops the heartbeat (rank 0's also ends the liveness store: call barrier(TRIAX_GROUP_WORLD)
  // first so that no rank still needs it) and frees the group communicators; finalises MPI when
  // this module initialised it. After a CommunicationError, or while an exception unwinds, it
  // frees nothing and leaves MPI initialised: clean-up with a dead peer could wait forever.
  ~MpiCommunicator() override;

  // The MPI world as the launcher started it (initialises MPI when nothing did yet).
  static int world_rank();
  static int world_size();
  // The thread level to initialise MPI with (MPI_THREAD_MULTIPLE unless TRIAX_MPI_PROGRESS_THREAD=0,
  // mpi_progress_thread.hpp): a program that initialises MPI itself asks for this one.
  static int required_thread_level();

  const ParallelContext& context() const;

  const char* backend_name() const override { return "mpi"; }
  int rank(triax_group group) const override;
  int size(triax_group group) const override;
  // all_reduce and reduce_scatter are posted with MPI_Iallreduce / MPI_Ireduce_scatter_block;
  // they progress whenever this rank calls MPI (any operation, or the handle's test()).
  bool has_asynchronous_collectives() const override { return true; }
  // Sends are posted from a private copy and complete in the background (run_send), driven by a
  // progress thread while this rank computes (mpi_progress_thread.hpp).
  bool buffers_sends() const override { return true; }
  void set_step(int64_t step) override;
  bool failed() const override;
  void report_failure(const std::string& message) override;

  struct Impl;  // the MPI state (mpi_session.hpp; its pending operations use it)

 protected:
  void require_device(const at::Tensor& tensor, const char* operation, const char* role) const override;
  void run_all_reduce(triax_group group, const at::Tensor& tensor, triax_reduce_op op) override;
  std::unique_ptr<PendingOperation> run_start_all_reduce(triax_group group, const at::Tensor& tensor,
                                                         triax_reduce_op op) override;
  void run_all_gather(triax_group group, const at::Tensor& output, const at::Tensor& input) override;
  std::unique_ptr<PendingOperation> run_start_all_gather(triax_group group, const at::Tensor& output,
                                                         const at::Tensor& input) override;
  void run_reduce_scatter(triax_group group, const at::Tensor& output, const at::Tensor& input,
                          triax_reduce_op op) override;
  std::unique_ptr<PendingOperation> run_start_reduce_scatter(triax_group group, const at::Tensor& output,
                                                             const at::Tensor& input, triax_reduce_op op) override;
  void run_broadcast(triax_group group, const at::Tensor& tensor, int root) override;
  void run_all_to_all(triax_group group, const at::Tensor& output, const at::Tensor& input) override;
  void run_all_to_all_v(triax_group group, const at::Tensor& output, const at::Tensor& input,
                        const std::vector<int64_t>& output_splits, const std::vector<int64_t>& input_splits) override;
  // Returns once the transfer is posted: it runs in the background from a private copy and is
  // delivered by the next barrier or set_step at the latest (neighbours may send to each other
  // before either receives).
  void run_send(triax_group group, const at::Tensor& tensor, int peer) override;
  void run_recv(triax_group group, const at::Tensor& tensor, int peer) override;
  void run_barrier(triax_group group) override;
  // MPI_Isend and MPI_Irecv posted together, finished as one operation.
  std::unique_ptr<PendingOperation> run_start_send_recv(triax_group group, const at::Tensor& send, int send_peer,
                                                        const at::Tensor& recv, int recv_peer) override;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace triax
