// The `mpi` backend. Each group kind of the mesh gets its own MPI communicator (MPI_Comm_split of
// the world with the group's index as colour and the rank within the group as key, so MPI's
// ranks are the group ranks of ParallelContext::members). Every operation is posted
// non-blocking and polled until a deadline; MPI errors are returned, not fatal, so that a dead
// peer becomes a CommunicationError with the heartbeat's explanation.
#include "triax/core/comm/mpi_communicator.hpp"

#include <ATen/ATen.h>
#include <mpi.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <thread>

#include "comm/heartbeat.hpp"

namespace triax {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kGroupKinds = TRIAX_GROUP_EP + 1;
bool g_mpi_initialized_here = false;
int g_live_communicators = 0;

void ensure_mpi_initialized() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  // Only the main thread calls MPI; the heartbeat thread talks to the TCP store.
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
    throw Error("MPI_Init_thread failed: the mpi backend needs a process started by mpirun or srun");
  g_mpi_initialized_here = true;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(length));
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", seconds);
  return text;
}

// The MPI type that moves a tensor's elements unchanged (half types travel as 16-bit words).
MPI_Datatype transfer_type(const at::Tensor& tensor, const char* operation) {
  switch (tensor.scalar_type()) {
    case at::kFloat:
      return MPI_FLOAT;
    case at::kDouble:
      return MPI_DOUBLE;
    case at::kBFloat16:
    case at::kHalf:
      return MPI_UINT16_T;
    case at::kLong:
      return MPI_INT64_T;
    case at::kInt:
      return MPI_INT32_T;
    case at::kByte:
    case at::kBool:
      return MPI_UINT8_T;
    default:
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, std::string(operation) + ": the mpi backend does not handle " +
                                                    std::string(c10::toString(tensor.scalar_type())) +
                                                    " tensors (float32, float64, bfloat16, float16, int64, int32, "
                                                    "uint8 are supported)");
  }
}

MPI_Op mpi_op(triax_reduce_op op) {
  switch (op) {
    case TRIAX_REDUCE_SUM:
    case TRIAX_REDUCE_AVG:
      return MPI_SUM;
    case TRIAX_REDUCE_MAX:
      return MPI_MAX;
    case TRIAX_REDUCE_MIN:
      return MPI_MIN;
  }
  throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "unknown reduce op " + std::to_string(static_cast<int>(op)));
}

bool is_half_type(const at::Tensor& tensor) {
  return tensor.scalar_type() == at::kBFloat16 || tensor.scalar_type() == at::kHalf;
}

// MPI has no 16-bit float arithmetic: reductions of bf16/fp16 run in fp32 (one rounding at the end).
at::Tensor reduction_buffer(const at::Tensor& tensor) {
  if (is_half_type(tensor)) return tensor.to(at::kFloat).contiguous();
  if (tensor.scalar_type() == at::kBool)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "reductions of bool tensors are not supported");
  return tensor.contiguous();
}

void finish_average(const at::Tensor& buffer, triax_reduce_op op, int group_size) {
  if (op != TRIAX_REDUCE_AVG) return;
  if (at::isFloatingType(buffer.scalar_type()))
    buffer.div_(group_size);
  else
    buffer.div_(group_size, "trunc");
}

// Writes `result` into `target` unless they already share memory.
void write_back(const at::Tensor& target, const at::Tensor& result) {
  if (!result.is_same(target)) target.copy_(result);
}

int element_count(const at::Tensor& tensor, const char* operation) {
  if (tensor.numel() > std::numeric_limits<int>::max())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, std::string(operation) + ": " + std::to_string(tensor.numel()) +
                                                  " elements exceed MPI's int count; split the tensor");
  return static_cast<int>(tensor.numel());
}

// Buffers of operations abandoned at a timeout: MPI may still write into them when the silent
// peer answers at last, so they are never freed.
void abandon(const std::vector<at::Tensor>& buffers) {
  static auto* graveyard = new std::vector<at::Tensor>();
  graveyard->insert(graveyard->end(), buffers.begin(), buffers.end());
}

}  // namespace

struct MpiCommunicator::Impl {
  ParallelContext context;
  CommunicatorOptions options;
  std::array<MPI_Comm, kGroupKinds> comms;
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

  // Forgets the sends that completed.
  void reap_sends() {
    for (auto it = pending_sends.begin(); it != pending_sends.end();) {
      int done = 0;
      const int code = MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
      if (code != MPI_SUCCESS) {
        abandon_sends();
        fail(it->what, "failed in MPI (" + mpi_error_text(code) + ")", it->suspect);
      }
      it = done ? pending_sends.erase(it) : std::next(it);
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
    }
  }

  // After a failure MPI may still read the sends' buffers: they are never freed.
  void abandon_sends() {
    for (const PendingSend& send : pending_sends) abandon({send.buffer});
    pending_sends.clear();
  }

  Impl(const MeshShape& shape, int world_rank, const CommunicatorOptions& o) : context(shape, world_rank), options(o) {
    comms.fill(MPI_COMM_NULL);
  }

  MPI_Comm comm(triax_group group) const {
    if (static_cast<int>(group) < 0 || static_cast<int>(group) >= kGroupKinds)
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "unknown process group " + std::to_string(static_cast<int>(group)));
    return comms[group];
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
        abandon(buffers);
        fail(what, "failed in MPI (" + mpi_error_text(code) + ")", suspects);
      }
      if (done) return;
      const auto now = Clock::now();
      if (now >= deadline) {
        abandon(buffers);
        fail(what, "got no answer for " + seconds_text(options.timeout_seconds), suspects);
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
    if (code != MPI_SUCCESS) fail(what, "could not start (" + mpi_error_text(code) + ")", suspects);
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

  // Posts a collective and returns it in flight.
  std::unique_ptr<PendingOperation> start(triax_group group, const char* operation, std::vector<at::Tensor> buffers,
                                          const std::function<int(MPI_Request*)>& post, std::function<void()> finish);

  int checked_peer(triax_group group, int peer, const char* operation) const {
    const int size = context.size(group);
    if (peer < 0 || peer >= size || peer == context.rank(group))
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                  std::string(operation) + ": peer " + std::to_string(peer) + " is not another rank of the " +
                      group_name(group) + " group " + format_ranks(context.members(group)) + " (this rank is " +
                      std::to_string(context.rank(group)) + " of " + std::to_string(size) + ")");
    return peer;
  }
};

namespace {

// A posted collective: `finish` (the fp32 copy-back, the average) runs once it completes. Until
// then its buffers stay alive; dropped unfinished (after an error elsewhere), they are abandoned.
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
    if (request_ != MPI_REQUEST_NULL) abandon(buffers_);
  }
  MPI_Request* request() { return &request_; }

  void wait() override {
    if (done_) return;
    impl_.require_usable();
    impl_.wait(&request_, 1, what_, suspects_, buffers_);
    complete();
  }

  bool test() override {
    if (done_) return true;
    impl_.require_usable();
    int done = 0;
    const int code = MPI_Test(&request_, &done, MPI_STATUS_IGNORE);
    if (code != MPI_SUCCESS) {
      abandon(buffers_);
      impl_.fail(what_, "failed in MPI (" + mpi_error_text(code) + ")", suspects_);
    }
    if (done) complete();
    return done_;
  }

 private:
  void complete() {
    request_ = MPI_REQUEST_NULL;
    done_ = true;
    finish_();
  }

  MpiCommunicator::Impl& impl_;
  std::string what_;
  std::vector<int> suspects_;
  std::vector<at::Tensor> buffers_;
  std::function<void()> finish_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  bool done_ = false;
};

void require_cpu(const at::Tensor& tensor, const char* operation, const char* role = "tensor") {
  if (!tensor.defined())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, std::string(operation) + ": the " + role + " is undefined");
  if (!tensor.device().is_cpu())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, std::string(operation) + ": the mpi backend moves CPU tensors, the " +
                                                  role + " is on " + tensor.device().str() +
                                                  " (use parallelism.comm_backend: nccl on GPUs)");
}

void require_same_dtype(const at::Tensor& output, const at::Tensor& input, const char* operation) {
  if (output.scalar_type() != input.scalar_type())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, std::string(operation) + ": output is " +
                                                  std::string(c10::toString(output.scalar_type())) + ", input " +
                                                  std::string(c10::toString(input.scalar_type())));
}

void require_numel(const at::Tensor& tensor, int64_t expected, const char* operation, const std::string& why) {
  if (tensor.numel() != expected)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, std::string(operation) + ": " + why + " must hold " +
                                                  std::to_string(expected) + " elements, it holds " +
                                                  std::to_string(tensor.numel()));
}

// An input that shares memory with the output is copied first: MPI forbids overlapping buffers.
at::Tensor separate_input(const at::Tensor& input, const at::Tensor& output) {
  const bool overlaps = input.is_alias_of(output);
  return overlaps ? input.clone() : input.contiguous();
}

}  // namespace

std::unique_ptr<PendingOperation> MpiCommunicator::Impl::start(triax_group group, const char* operation,
                                                               std::vector<at::Tensor> buffers,
                                                               const std::function<int(MPI_Request*)>& post,
                                                               std::function<void()> finish) {
  require_usable();
  std::vector<int> members = context.members(group);
  std::string what = describe(operation, group);
  auto pending = std::make_unique<MpiPendingOperation>(*this, what, members, std::move(buffers), std::move(finish));
  post_or_fail(post(pending->request()), what, members);
  return pending;
}

namespace {

std::string store_address() {
  if (const char* master = std::getenv("MASTER_ADDR"); master && *master) return master;
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name) != 0) return "127.0.0.1";
  return name;
}

}  // namespace

int MpiCommunicator::world_rank() {
  ensure_mpi_initialized();
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

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
                      ") x pp (" + std::to_string(shape.pp) + ") = " + std::to_string(shape.world_size()) +
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

  // Rank 0 hosts the liveness store on a free port and tells everyone where it is.
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
  if (rank != 0) {
    try {
      s.heartbeat = Heartbeat::join(address, static_cast<uint16_t>(*port), rank, size, beat);
    } catch (const Error& e) {
      s.failed = true;
      throw CommunicationError(std::string(e.what()) + " (rank 0 is dead or hung)");
    }
  }
  // Nobody starts work (and may fail and leave) before everyone reached rank 0's store.
  request = MPI_REQUEST_NULL;
  s.post_or_fail(MPI_Ibarrier(MPI_COMM_WORLD, &request), "liveness store barrier", everyone);
  s.wait(&request, 1, "waiting for every rank to connect to the liveness store", everyone, {});
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

void MpiCommunicator::all_reduce(triax_group group, const at::Tensor& tensor, triax_reduce_op op) {
  start_all_reduce(group, tensor, op)->wait();
}

std::unique_ptr<PendingOperation> MpiCommunicator::start_all_reduce(triax_group group, const at::Tensor& tensor,
                                                                    triax_reduce_op op) {
  Impl& s = *impl_;
  require_cpu(tensor, "all_reduce");
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

void MpiCommunicator::all_gather(triax_group group, const at::Tensor& output, const at::Tensor& input) {
  Impl& s = *impl_;
  require_cpu(output, "all_gather", "output");
  require_cpu(input, "all_gather", "input");
  require_same_dtype(output, input, "all_gather");
  const int size = s.context.size(group);
  require_numel(output, input.numel() * size, "all_gather",
                "the output (" + std::to_string(size) + " x the input's " + std::to_string(input.numel()) + ")");
  const MPI_Datatype type = transfer_type(input, "all_gather");
  const at::Tensor source = separate_input(input, output);
  at::Tensor target = output.contiguous();
  const int count = element_count(source, "all_gather");
  MPI_Comm comm = s.comm(group);
  s.collective(group, "all_gather", {source, target}, [&](MPI_Request* request) {
    return MPI_Iallgather(source.data_ptr(), count, type, target.data_ptr(), count, type, comm, request);
  });
  write_back(output, target);
}

void MpiCommunicator::reduce_scatter(triax_group group, const at::Tensor& output, const at::Tensor& input,
                                     triax_reduce_op op) {
  start_reduce_scatter(group, output, input, op)->wait();
}

std::unique_ptr<PendingOperation> MpiCommunicator::start_reduce_scatter(triax_group group, const at::Tensor& output,
                                                                        const at::Tensor& input, triax_reduce_op op) {
  Impl& s = *impl_;
  require_cpu(output, "reduce_scatter", "output");
  require_cpu(input, "reduce_scatter", "input");
  require_same_dtype(output, input, "reduce_scatter");
  const int size = s.context.size(group);
  require_numel(input, output.numel() * size, "reduce_scatter",
                "the input (" + std::to_string(size) + " x the output's " + std::to_string(output.numel()) + ")");
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

void MpiCommunicator::broadcast(triax_group group, const at::Tensor& tensor, int root) {
  Impl& s = *impl_;
  require_cpu(tensor, "broadcast");
  const int size = s.context.size(group);
  if (root < 0 || root >= size)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "broadcast: root " + std::to_string(root) + " is not a rank of the " +
                                                  group_name(group) + " group of size " + std::to_string(size));
  const MPI_Datatype type = transfer_type(tensor, "broadcast");
  at::Tensor buffer = tensor.contiguous();
  const int count = element_count(buffer, "broadcast");
  MPI_Comm comm = s.comm(group);
  s.collective(group, "broadcast", {buffer},
               [&](MPI_Request* request) { return MPI_Ibcast(buffer.data_ptr(), count, type, root, comm, request); });
  write_back(tensor, buffer);
}

void MpiCommunicator::all_to_all(triax_group group, const at::Tensor& output, const at::Tensor& input) {
  Impl& s = *impl_;
  require_cpu(output, "all_to_all", "output");
  require_cpu(input, "all_to_all", "input");
  require_same_dtype(output, input, "all_to_all");
  const int size = s.context.size(group);
  require_numel(output, input.numel(), "all_to_all", "the output (as many as the input)");
  if (input.numel() % size != 0)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "all_to_all: the input's " + std::to_string(input.numel()) +
                                                  " elements do not split evenly over the " + group_name(group) +
                                                  " group of size " + std::to_string(size));
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

void MpiCommunicator::send(triax_group group, const at::Tensor& tensor, int peer) {
  Impl& s = *impl_;
  require_cpu(tensor, "send");
  s.checked_peer(group, peer, "send");
  s.require_usable();
  const MPI_Datatype type = transfer_type(tensor, "send");
  Impl::PendingSend send;
  send.buffer = tensor.contiguous().clone();  // the caller may change the tensor once we return
  const int count = element_count(send.buffer, "send");
  send.what = s.describe("send", group, peer, "to");
  send.suspect = {s.context.members(group)[peer]};
  s.post_or_fail(MPI_Isend(send.buffer.data_ptr(), count, type, peer, 0, s.comm(group), &send.request), send.what,
                 send.suspect);
  s.pending_sends.push_back(std::move(send));
  s.reap_sends();
}

void MpiCommunicator::recv(triax_group group, const at::Tensor& tensor, int peer) {
  Impl& s = *impl_;
  require_cpu(tensor, "recv");
  s.checked_peer(group, peer, "recv");
  s.require_usable();
  const MPI_Datatype type = transfer_type(tensor, "recv");
  at::Tensor buffer = tensor.contiguous();
  const int count = element_count(buffer, "recv");
  const std::string what = s.describe("recv", group, peer, "from");
  const std::vector<int> suspect{s.context.members(group)[peer]};
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

void MpiCommunicator::barrier(triax_group group) {
  Impl& s = *impl_;
  s.finish_sends();
  MPI_Comm comm = s.comm(group);
  s.collective(group, "barrier", {}, [&](MPI_Request* request) { return MPI_Ibarrier(comm, request); });
}

}  // namespace triax
