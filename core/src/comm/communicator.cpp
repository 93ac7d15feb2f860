// The single-process communicator and the C host-services table over any Communicator.
#include "triax/core/comm/communicator.hpp"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "triax/core/log.hpp"
#include "triax/error.hpp"
#include "triax/plugin.hpp"
#include "triax/tensor_handle.hpp"

namespace triax {
namespace {

void require_same_numel(const at::Tensor& output, const at::Tensor& input, const char* what) {
  if (output.numel() != input.numel())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, std::string(what) + ": output holds " + std::to_string(output.numel()) +
                                                  " elements, input " + std::to_string(input.numel()) +
                                                  " (group of size 1)");
}

[[noreturn]] void no_peer(int peer) {
  throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
              "point-to-point with peer " + std::to_string(peer) + " in a group of one process");
}

}  // namespace

void SingleProcessCommunicator::all_gather(triax_group, const at::Tensor& output, const at::Tensor& input) {
  require_same_numel(output, input, "all_gather");
  output.view_as(input).copy_(input);
}

void SingleProcessCommunicator::reduce_scatter(triax_group, const at::Tensor& output, const at::Tensor& input,
                                               triax_reduce_op) {
  require_same_numel(output, input, "reduce_scatter");
  output.view_as(input).copy_(input);
}

void SingleProcessCommunicator::broadcast(triax_group, const at::Tensor&, int root) {
  if (root != 0) no_peer(root);
}

void SingleProcessCommunicator::all_to_all(triax_group, const at::Tensor& output, const at::Tensor& input) {
  require_same_numel(output, input, "all_to_all");
  output.view_as(input).copy_(input);
}

void SingleProcessCommunicator::send(triax_group, const at::Tensor&, int peer) { no_peer(peer); }
void SingleProcessCommunicator::recv(triax_group, const at::Tensor&, int peer) { no_peer(peer); }

namespace {

Communicator& comm(void* self) { return *static_cast<Communicator*>(self); }

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

}  // namespace

HostServices::HostServices(Communicator& communicator) : communicator_(communicator) {
  host_.struct_size = sizeof(triax_host);
  host_.self = &communicator_;
  host_.log = host_log;
  host_.group_rank = [](void* self, triax_group group) -> int32_t { return comm(self).rank(group); };
  host_.group_size = [](void* self, triax_group group) -> int32_t { return comm(self).size(group); };
  host_.all_reduce = [](void* self, triax_group group, triax_tensor* tensor, triax_reduce_op op, triax_error* error) {
    return guarded(error, [&] { comm(self).all_reduce(group, view_handle(tensor), op); });
  };
  host_.all_gather = [](void* self, triax_group group, triax_tensor* output, triax_tensor* input, triax_error* error) {
    return guarded(error, [&] { comm(self).all_gather(group, view_handle(output), view_handle(input)); });
  };
  host_.reduce_scatter = [](void* self, triax_group group, triax_tensor* output, triax_tensor* input,
                            triax_reduce_op op, triax_error* error) {
    return guarded(error, [&] { comm(self).reduce_scatter(group, view_handle(output), view_handle(input), op); });
  };
  host_.broadcast = [](void* self, triax_group group, triax_tensor* tensor, int32_t root, triax_error* error) {
    return guarded(error, [&] { comm(self).broadcast(group, view_handle(tensor), root); });
  };
  host_.all_to_all = [](void* self, triax_group group, triax_tensor* output, triax_tensor* input, triax_error* error) {
    return guarded(error, [&] { comm(self).all_to_all(group, view_handle(output), view_handle(input)); });
  };
  host_.send = [](void* self, triax_group group, triax_tensor* tensor, int32_t peer, triax_error* error) {
    return guarded(error, [&] { comm(self).send(group, view_handle(tensor), peer); });
  };
  host_.recv = [](void* self, triax_group group, triax_tensor* tensor, int32_t peer, triax_error* error) {
    return guarded(error, [&] { comm(self).recv(group, view_handle(tensor), peer); });
  };
  host_.barrier = [](void* self, triax_group group, triax_error* error) {
    return guarded(error, [&] { comm(self).barrier(group); });
  };
}

}  // namespace triax
