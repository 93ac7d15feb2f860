// The C host-services table handed to every plugin, backed by a Communicator and the core's log.
#include <ATen/ATen.h>

#include <memory>
#include <string>

#include "triax/core/comm/communicator.hpp"
#include "triax/error.hpp"
#include "triax/plugin.hpp"
#include "triax/report/log.hpp"
#include "triax/tensor_handle.hpp"

// What triax_pending stands for: a started collective, owned by the plugin until it calls finish.
struct triax_pending {
  std::unique_ptr<triax::PendingOperation> operation;
};

namespace triax {
namespace {

Communicator& comm(void* self) { return *static_cast<Communicator*>(self); }

void hand_over(std::unique_ptr<PendingOperation> operation, triax_pending** pending) {
  *pending = new triax_pending{std::move(operation)};
}

void require_slot(triax_pending** pending, const char* operation) {
  if (pending == nullptr)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, std::string(operation) + ": no place for the pending operation");
}

using detail::guarded;

void host_log(void*, triax_log_level level, const char* message) {
  switch (level) {
    case TRIAX_LOG_DEBUG:
      log::debug(message);
      break;
    case TRIAX_LOG_INFO:
      log::info(message);
      break;
    case TRIAX_LOG_WARNING:
      log::warning(message);
      break;
    default:
      log::error(message);
      break;
  }
}

// The table's blocking operations: each returns once the communicator's operation completed.
void fill_blocking_operations(triax_host& host) {
  host.group_rank = [](void* self, triax_group group) -> int32_t { return comm(self).rank(group); };
  host.group_size = [](void* self, triax_group group) -> int32_t { return comm(self).size(group); };
  host.all_reduce = [](void* self, triax_group group, triax_tensor* tensor, triax_reduce_op op, triax_error* error) {
    return guarded(error, [&] { comm(self).all_reduce(group, view_handle(tensor), op); });
  };
  host.all_gather = [](void* self, triax_group group, triax_tensor* output, triax_tensor* input, triax_error* error) {
    return guarded(error, [&] { comm(self).all_gather(group, view_handle(output), view_handle(input)); });
  };
  host.reduce_scatter = [](void* self, triax_group group, triax_tensor* output, triax_tensor* input, triax_reduce_op op,
                           triax_error* error) {
    return guarded(error, [&] { comm(self).reduce_scatter(group, view_handle(output), view_handle(input), op); });
  };
  host.broadcast = [](void* self, triax_group group, triax_tensor* tensor, int32_t root, triax_error* error) {
    return guarded(error, [&] { comm(self).broadcast(group, view_handle(tensor), root); });
  };
  host.all_to_all = [](void* self, triax_group group, triax_tensor* output, triax_tensor* input, triax_error* error) {
    return guarded(error, [&] { comm(self).all_to_all(group, view_handle(output), view_handle(input)); });
  };
  host.send = [](void* self, triax_group group, triax_tensor* tensor, int32_t peer, triax_error* error) {
    return guarded(error, [&] { comm(self).send(group, view_handle(tensor), peer); });
  };
  host.recv = [](void* self, triax_group group, triax_tensor* tensor, int32_t peer, triax_error* error) {
    return guarded(error, [&] { comm(self).recv(group, view_handle(tensor), peer); });
  };
  host.barrier = [](void* self, triax_group group, triax_error* error) {
    return guarded(error, [&] { comm(self).barrier(group); });
  };
  host.all_to_all_v = [](void* self, triax_group group, triax_tensor* output, triax_tensor* input,
                         const int64_t* output_splits, const int64_t* input_splits, triax_error* error) {
    return guarded(error, [&] {
      const auto ranks = static_cast<size_t>(comm(self).size(group));
      if (output_splits == nullptr || input_splits == nullptr)
        throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "all_to_all_v: the split arrays may not be null");
      comm(self).all_to_all_v(group, view_handle(output), view_handle(input),
                              std::vector<int64_t>(output_splits, output_splits + ranks),
                              std::vector<int64_t>(input_splits, input_splits + ranks));
    });
  };
}

// The table's started operations: each hands back a pending operation that finish() waits for.
void fill_started_operations(triax_host& host) {
  host.start_all_reduce = [](void* self, triax_group group, triax_tensor* tensor, triax_reduce_op op,
                             triax_pending** pending, triax_error* error) {
    return guarded(error, [&] {
      require_slot(pending, "start_all_reduce");
      hand_over(comm(self).start_all_reduce(group, view_handle(tensor), op), pending);
    });
  };
  host.start_all_gather = [](void* self, triax_group group, triax_tensor* output, triax_tensor* input,
                             triax_pending** pending, triax_error* error) {
    return guarded(error, [&] {
      require_slot(pending, "start_all_gather");
      hand_over(comm(self).start_all_gather(group, view_handle(output), view_handle(input)), pending);
    });
  };
  host.start_reduce_scatter = [](void* self, triax_group group, triax_tensor* output, triax_tensor* input,
                                 triax_reduce_op op, triax_pending** pending, triax_error* error) {
    return guarded(error, [&] {
      require_slot(pending, "start_reduce_scatter");
      hand_over(comm(self).start_reduce_scatter(group, view_handle(output), view_handle(input), op), pending);
    });
  };
  host.start_send_recv = [](void* self, triax_group group, triax_tensor* send, int32_t send_peer, triax_tensor* recv,
                            int32_t recv_peer, triax_pending** pending, triax_error* error) {
    return guarded(error, [&] {
      require_slot(pending, "start_send_recv");
      hand_over(comm(self).start_send_recv(group, view_handle(send), send_peer, view_handle(recv), recv_peer), pending);
    });
  };
  host.finish = [](void*, triax_pending* pending, triax_error* error) {
    return guarded(error, [&] {
      const std::unique_ptr<triax_pending> owned(pending);  // released even when the wait throws
      if (!owned) throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "finish: no pending operation");
      owned->operation->wait();
    });
  };
}

}  // namespace

HostServices::HostServices(Communicator& communicator) : communicator_(communicator) {
  host_.struct_size = sizeof(triax_host);
  host_.self = &communicator_;
  host_.log = host_log;
  fill_blocking_operations(host_);
  fill_started_operations(host_);
}

}  // namespace triax
