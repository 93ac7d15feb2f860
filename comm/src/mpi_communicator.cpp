// The `mpi` backend. Each group kind of the mesh gets its own MPI communicator (MPI_Comm_split of
// the world with the group's index as colour and the rank within the group as key, so MPI's
// ranks are the group ranks of ParallelContext::members). Every operation is posted
// non-blocking and polled until a deadline (mpi_session.hpp); MPI errors are returned, not
// fatal, so that a dead peer becomes a CommunicationError with the heartbeat's explanation.
#include "mpi_communicator.hpp"

#include <ATen/ATen.h>
#include <mpi.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "mpi_session.hpp"

namespace triax {
namespace {

using namespace mpi_detail;

bool g_mpi_initialized_here = false;
int g_live_communicators = 0;

void ensure_mpi_initialized() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  // The heartbeat thread talks to the TCP store, not MPI; the progress thread, when on, calls MPI.
  if (MPI_Init_thread(nullptr, nullptr, MpiCommunicator::required_thread_level(), &provided) != MPI_SUCCESS)
    throw Error("MPI_Init_thread failed: the mpi backend needs a process started by mpirun or srun");
  g_mpi_initialized_here = true;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

std::string store_address() {
  if (const char* master = std::getenv("MASTER_ADDR"); master && *master) return master;
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name) != 0) return "127.0.0.1";
  return name;
}

// One MPI communicator per group kind, its ranks in ParallelContext::members order.
void split_groups(MpiCommunicator::Impl& s, int rank) {
  for (int kind = 0; kind < kGroupKinds; ++kind) {
    const auto group = static_cast<triax_group>(kind);
    MPI_Comm comm = MPI_COMM_NULL;
    const int code = MPI_Comm_split(MPI_COMM_WORLD, s.context.group_index(group), s.context.rank(group), &comm);
    if (code != MPI_SUCCESS)
      throw CommunicationError("rank " + std::to_string(rank) + ": splitting the " + group_name(group) +
                               " groups failed: " + mpi_error_text(code));
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    s.comms[kind] = comm;
  }
}

// Rank 0 hosts the liveness store on a free port and tells everyone where it is; the others join it.
void start_heartbeat(MpiCommunicator::Impl& s, const CommunicatorOptions& options, int rank, int size) {
  Heartbeat::Options beat;
  beat.interval_seconds = options.heartbeat_interval_seconds;
  beat.connect_timeout_seconds = options.timeout_seconds;
  at::Tensor address_buffer = at::zeros({256}, at::kChar);  // tensors: kept alive if abandoned
  at::Tensor port_buffer = at::zeros({1}, at::kInt);
  char* address = static_cast<char*>(address_buffer.data_ptr());
  int* port = port_buffer.data_ptr<int>();
  if (rank == 0) {
    const std::string host = store_address();
    std::strncpy(address, host.c_str(), 255);
    s.heartbeat = Heartbeat::host(host, 0, size, beat);
    *port = s.heartbeat->port();
  }
  std::array<MPI_Request, 2> announce{MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  s.post_or_fail(MPI_Ibcast(address, 256, MPI_CHAR, 0, MPI_COMM_WORLD, &announce[0]), "announcing the liveness store",
                 {0});
  s.post_or_fail(MPI_Ibcast(port, 1, MPI_INT, 0, MPI_COMM_WORLD, &announce[1]), "announcing the liveness store", {0});
  s.wait(announce.data(), 2, "waiting for rank 0 to announce its liveness store", {0}, {address_buffer, port_buffer});
  if (rank == 0) return;
  try {
    s.heartbeat = Heartbeat::join(address, static_cast<uint16_t>(*port), rank, size, beat);
  } catch (const Error& e) {
    s.failed = true;
    throw CommunicationError(std::string(e.what()) + " (rank 0 is dead or hung)");
  }
}

}  // namespace

int MpiCommunicator::world_rank() {
  ensure_mpi_initialized();
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int MpiCommunicator::required_thread_level() { return MpiProgressThread::required_thread_level(); }

int MpiCommunicator::world_size() {
  ensure_mpi_initialized();
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

MpiCommunicator::MpiCommunicator(const MeshShape& shape, const CommunicatorOptions& options) {
  const int rank = world_rank();
  const int size = world_size();
  shape.validate();
  if (shape.world_size() != size)
    throw ConfigError("parallelism: dp (" + std::to_string(shape.dp) + ") x tp (" + std::to_string(shape.tp) +
                      ") x pp (" + std::to_string(shape.pp) + ") x cp (" +
                      std::to_string(shape.cp) + ") = " + std::to_string(shape.world_size()) +
                      ", but mpirun started " + std::to_string(size) + " processes (rank " + std::to_string(rank) +
                      ")");
  if (!(options.timeout_seconds > 0)) throw ConfigError("parallelism.comm_timeout_seconds: must be > 0");
  impl_ = std::make_unique<Impl>(shape, rank, options);
  Impl& s = *impl_;

  // Every rank must arrive before the blocking group splits; one that never does is named.
  std::vector<int> everyone = s.context.members(TRIAX_GROUP_WORLD);
  MPI_Request request = MPI_REQUEST_NULL;
  s.post_or_fail(MPI_Ibarrier(MPI_COMM_WORLD, &request), "start-up barrier", everyone);
  s.wait(&request, 1, "start-up barrier of all " + std::to_string(size) + " ranks", everyone, {});

  split_groups(s, rank);
  start_heartbeat(s, options, rank, size);
  // Nobody starts work (and may fail and leave) before everyone reached rank 0's store.
  request = MPI_REQUEST_NULL;
  s.post_or_fail(MPI_Ibarrier(MPI_COMM_WORLD, &request), "liveness store barrier", everyone);
  s.wait(&request, 1, "waiting for every rank to connect to the liveness store", everyone, {});
  if (MpiProgressThread::requested()) {
    if (MpiProgressThread::supported())
      s.progress = std::make_unique<MpiProgressThread>();
    else if (rank == 0)
      std::fprintf(stderr,
                   "triax: MPI was initialised without MPI_THREAD_MULTIPLE: no MPI progress thread, sends move "
                   "only while their rank calls MPI (TRIAX_MPI_PROGRESS_THREAD)\n");
  }
  ++g_live_communicators;
}

MpiCommunicator::~MpiCommunicator() {
  --g_live_communicators;
  Impl& s = *impl_;
  if (!s.failed && std::uncaught_exceptions() == 0) {
    try {
      s.finish_sends();
    } catch (const std::exception&) {
      s.failed = true;
    }
  }
  if (s.failed || std::uncaught_exceptions() > 0) s.abandon_sends();
  s.progress.reset();  // local MPI calls only: safe after a failure too
  s.heartbeat.reset();
  if (s.failed || std::uncaught_exceptions() > 0) return;  // see the header: no collective clean-up
  for (MPI_Comm& comm : s.comms)
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  if (g_mpi_initialized_here && g_live_communicators == 0) {
    MPI_Finalize();
    g_mpi_initialized_here = false;
  }
}

const ParallelContext& MpiCommunicator::context() const { return impl_->context; }
int MpiCommunicator::rank(triax_group group) const { return impl_->context.rank(group); }
int MpiCommunicator::size(triax_group group) const { return impl_->context.size(group); }

void MpiCommunicator::set_step(int64_t step) {
  impl_->finish_sends();  // the previous step's transfers are delivered before the next starts
  impl_->step = step;
  if (impl_->heartbeat) impl_->heartbeat->set_step(step);
}

bool MpiCommunicator::failed() const { return impl_->failed; }

void MpiCommunicator::report_failure(const std::string& message) {
  if (impl_->heartbeat) impl_->heartbeat->publish_failure(message);
}

void MpiCommunicator::require_device(const at::Tensor& tensor, const char* operation, const char* role) const {
  if (!tensor.device().is_cpu())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, std::string(operation) + ": the mpi backend moves CPU tensors, the " +
                                                  role + " is on " + tensor.device().str() +
                                                  " (use parallelism.comm_backend: nccl on GPUs)");
}

void MpiCommunicator::run_all_reduce(triax_group group, const at::Tensor& tensor, triax_reduce_op op) {
  run_start_all_reduce(group, tensor, op)->wait();
}

std::unique_ptr<PendingOperation> MpiCommunicator::run_start_all_reduce(triax_group group, const at::Tensor& tensor,
                                                                        triax_reduce_op op) {
  Impl& s = *impl_;
  const MPI_Op reduce = mpi_op(op);
  transfer_type(tensor, "all_reduce");
  at::Tensor buffer = reduction_buffer(tensor);
  const int count = element_count(buffer, "all_reduce");
  const MPI_Datatype type = transfer_type(buffer, "all_reduce");
  MPI_Comm comm = s.comm(group);
  const int size = s.context.size(group);
  return s.start(
      group, "all_reduce", {buffer},
      [&](MPI_Request* request) {
        return MPI_Iallreduce(MPI_IN_PLACE, buffer.data_ptr(), count, type, reduce, comm, request);
      },
      [buffer, tensor, op, size] {
        finish_average(buffer, op, size);
        write_back(tensor, buffer);
      });
}

void MpiCommunicator::run_all_gather(triax_group group, const at::Tensor& output, const at::Tensor& input) {
  run_start_all_gather(group, output, input)->wait();
}

std::unique_ptr<PendingOperation> MpiCommunicator::run_start_all_gather(triax_group group, const at::Tensor& output,
                                                                        const at::Tensor& input) {
  Impl& s = *impl_;
  const MPI_Datatype type = transfer_type(input, "all_gather");
  const at::Tensor source = separate_input(input, output);
  at::Tensor target = output.contiguous();
  const int count = element_count(source, "all_gather");
  MPI_Comm comm = s.comm(group);
  return s.start(
      group, "all_gather", {source, target},
      [&](MPI_Request* request) {
        return MPI_Iallgather(source.data_ptr(), count, type, target.data_ptr(), count, type, comm, request);
      },
      [target, output] { write_back(output, target); });
}

void MpiCommunicator::run_reduce_scatter(triax_group group, const at::Tensor& output, const at::Tensor& input,
                                         triax_reduce_op op) {
  run_start_reduce_scatter(group, output, input, op)->wait();
}

std::unique_ptr<PendingOperation> MpiCommunicator::run_start_reduce_scatter(triax_group group,
                                                                            const at::Tensor& output,
                                                                            const at::Tensor& input,
                                                                            triax_reduce_op op) {
  Impl& s = *impl_;
  const int size = s.context.size(group);
  const MPI_Op reduce = mpi_op(op);
  transfer_type(input, "reduce_scatter");
  // The reduction buffers: fp32 for half types; the input copied when it overlaps the output.
  const at::Tensor source =
      is_half_type(input) ? reduction_buffer(input) : reduction_buffer(separate_input(input, output));
  at::Tensor target =
      is_half_type(output) ? at::empty(output.sizes(), output.options().dtype(at::kFloat)) : output.contiguous();
  const int count = element_count(target, "reduce_scatter");
  const MPI_Datatype type = transfer_type(target, "reduce_scatter");
  MPI_Comm comm = s.comm(group);
  return s.start(
      group, "reduce_scatter", {source, target},
      [&](MPI_Request* request) {
        return MPI_Ireduce_scatter_block(source.data_ptr(), target.data_ptr(), count, type, reduce, comm, request);
      },
      [target, output, op, size] {
        finish_average(target, op, size);
        write_back(output, target);
      });
}

void MpiCommunicator::run_broadcast(triax_group group, const at::Tensor& tensor, int root) {
  Impl& s = *impl_;
  const MPI_Datatype type = transfer_type(tensor, "broadcast");
  at::Tensor buffer = tensor.contiguous();
  const int count = element_count(buffer, "broadcast");
  MPI_Comm comm = s.comm(group);
  s.collective(group, "broadcast", {buffer},
               [&](MPI_Request* request) { return MPI_Ibcast(buffer.data_ptr(), count, type, root, comm, request); });
  write_back(tensor, buffer);
}

void MpiCommunicator::run_all_to_all(triax_group group, const at::Tensor& output, const at::Tensor& input) {
  Impl& s = *impl_;
  const int size = s.context.size(group);
  const MPI_Datatype type = transfer_type(input, "all_to_all");
  const at::Tensor source = separate_input(input, output);
  at::Tensor target = output.contiguous();
  const int count = element_count(source, "all_to_all") / size;
  MPI_Comm comm = s.comm(group);
  s.collective(group, "all_to_all", {source, target}, [&](MPI_Request* request) {
    return MPI_Ialltoall(source.data_ptr(), count, type, target.data_ptr(), count, type, comm, request);
  });
  write_back(output, target);
}

void MpiCommunicator::run_all_to_all_v(triax_group group, const at::Tensor& output, const at::Tensor& input,
                                       const std::vector<int64_t>& output_splits,
                                       const std::vector<int64_t>& input_splits) {
  Impl& s = *impl_;
  const MPI_Datatype type = transfer_type(input, "all_to_all_v");
  const int64_t row = input.dim() > 0 && input.size(0) > 0 ? input.numel() / input.size(0)
                                                           : output.numel() / std::max<int64_t>(1, output.size(0));
  // MPI counts and displacements in elements: rows times the elements of one row.
  auto layout = [&](const std::vector<int64_t>& splits, std::vector<int>& counts, std::vector<int>& offsets) {
    int64_t offset = 0;
    for (int64_t rows : splits) {
      counts.push_back(element_count(rows * row, "all_to_all_v"));
      offsets.push_back(element_count(offset, "all_to_all_v"));
      offset += rows * row;
    }
  };
  std::vector<int> send_counts, send_offsets, receive_counts, receive_offsets;
  layout(input_splits, send_counts, send_offsets);
  layout(output_splits, receive_counts, receive_offsets);
  const at::Tensor source = separate_input(input, output);
  at::Tensor target = output.contiguous();
  MPI_Comm comm = s.comm(group);
  s.collective(group, "all_to_all_v", {source, target}, [&](MPI_Request* request) {
    return MPI_Ialltoallv(source.data_ptr(), send_counts.data(), send_offsets.data(), type, target.data_ptr(),
                          receive_counts.data(), receive_offsets.data(), type, comm, request);
  });
  write_back(output, target);
}

void MpiCommunicator::run_send(triax_group group, const at::Tensor& tensor, int peer) {
  Impl& s = *impl_;
  s.require_usable();
  const MPI_Datatype type = transfer_type(tensor, "send");
  Impl::PendingSend send;
  send.buffer = tensor.contiguous().clone();  // the caller may change the tensor once we return
  const int count = element_count(send.buffer, "send");
  send.what = s.describe("send", group, peer, "to");
  send.suspect = {s.context.members(group)[static_cast<size_t>(peer)]};
  s.post_or_fail(MPI_Isend(send.buffer.data_ptr(), count, type, peer, 0, s.comm(group), &send.request), send.what,
                 send.suspect);
  s.add_send(std::move(send));
  s.reap_sends();
}

void MpiCommunicator::run_recv(triax_group group, const at::Tensor& tensor, int peer) {
  Impl& s = *impl_;
  s.require_usable();
  const MPI_Datatype type = transfer_type(tensor, "recv");
  at::Tensor buffer = tensor.contiguous();
  const int count = element_count(buffer, "recv");
  const std::string what = s.describe("recv", group, peer, "from");
  const std::vector<int> suspect{s.context.members(group)[static_cast<size_t>(peer)]};
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Status status;
  s.post_or_fail(MPI_Irecv(buffer.data_ptr(), count, type, peer, 0, s.comm(group), &request), what, suspect);
  s.wait(&request, 1, what, suspect, {buffer}, &status);
  int received = 0;
  MPI_Get_count(&status, type, &received);
  if (received != count) {
    s.failed = true;
    throw CommunicationError("rank " + std::to_string(s.context.world_rank()) + ": " + s.step_label() + ": " + what +
                             " received " + std::to_string(received) + " elements, expected " + std::to_string(count) +
                             " (the two ranks disagree on the tensor's size)");
  }
  write_back(tensor, buffer);
}

std::unique_ptr<PendingOperation> MpiCommunicator::run_start_send_recv(triax_group group, const at::Tensor& send,
                                                                       int send_peer, const at::Tensor& recv,
                                                                       int recv_peer) {
  Impl& s = *impl_;
  const MPI_Datatype type = transfer_type(send, "send_recv");
  const at::Tensor source = separate_input(send, recv);
  at::Tensor target = recv.contiguous();
  const int send_count = element_count(source, "send_recv");
  const int recv_count = element_count(target, "send_recv");
  MPI_Comm comm = s.comm(group);
  // Tag 1: kept apart from the blocking sends of the same group (tag 0).
  return s.start(
      group, "send_recv", {source, target},
      [&](MPI_Request* requests) {
        const int code = MPI_Irecv(target.data_ptr(), recv_count, type, recv_peer, 1, comm, &requests[1]);
        if (code != MPI_SUCCESS) return code;
        return MPI_Isend(source.data_ptr(), send_count, type, send_peer, 1, comm, &requests[0]);
      },
      [target, recv] { write_back(recv, target); });
}

void MpiCommunicator::run_barrier(triax_group group) {
  Impl& s = *impl_;
  s.finish_sends();
  MPI_Comm comm = s.comm(group);
  s.collective(group, "barrier", {}, [&](MPI_Request* request) { return MPI_Ibarrier(comm, request); });
}

}  // namespace triax
