// The Communicator base, where every backend's arguments are checked once, and the
// single-process communicator.
#include "triax/core/comm/communicator.hpp"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <numeric>

#include "comm/world_reduce.hpp"
#include "triax/core/comm/parallel_context.hpp"
#include "triax/error.hpp"

namespace triax {
namespace {

[[noreturn]] void invalid(const char* operation, const std::string& problem) {
  throw Error(TRIAX_ERROR_INVALID_ARGUMENT, std::string(operation) + ": " + problem);
}

void require_numel(const at::Tensor& tensor, int64_t expected, const char* operation, const std::string& what) {
  if (tensor.numel() != expected)
    invalid(operation, what + " must hold " + std::to_string(expected) + " elements, it holds " +
                           std::to_string(tensor.numel()));
}

void require_reduce_op(triax_reduce_op op, const char* operation) {
  if (op != TRIAX_REDUCE_SUM && op != TRIAX_REDUCE_AVG && op != TRIAX_REDUCE_MAX && op != TRIAX_REDUCE_MIN)
    invalid(operation, "unknown reduce op " + std::to_string(static_cast<int>(op)));
}

// One split per rank, none negative, together the tensor's rows.
void require_splits(const std::vector<int64_t>& splits, const at::Tensor& tensor, int group_size,
                    const char* role) {
  if (static_cast<int>(splits.size()) != group_size)
    invalid("all_to_all_v", std::string(role) + " splits have " + std::to_string(splits.size()) +
                                " entries for a group of " + std::to_string(group_size));
  for (int64_t rows : splits)
    if (rows < 0) invalid("all_to_all_v", std::string(role) + " splits hold a negative count " + std::to_string(rows));
  const int64_t rows = std::accumulate(splits.begin(), splits.end(), int64_t{0});
  if (rows != tensor.size(0))
    invalid("all_to_all_v", std::string(role) + " splits add up to " + std::to_string(rows) + " rows, the " + role +
                                " has " + std::to_string(tensor.size(0)));
}

}  // namespace

void Communicator::require_group(triax_group group, const char* operation) const {
  if (static_cast<int>(group) < TRIAX_GROUP_WORLD || static_cast<int>(group) > TRIAX_GROUP_EDP_CP)
    invalid(operation, "unknown process group " + std::to_string(static_cast<int>(group)));
}

void Communicator::require_tensor(const at::Tensor& tensor, const char* operation, const char* role) const {
  if (!tensor.defined()) invalid(operation, std::string("the ") + role + " is undefined");
  require_device(tensor, operation, role);
}

void Communicator::require_pair(const at::Tensor& output, const at::Tensor& input, const char* operation) const {
  require_tensor(output, operation, "output");
  require_tensor(input, operation, "input");
  if (output.scalar_type() != input.scalar_type())
    invalid(operation, "output is " + std::string(c10::toString(output.scalar_type())) + ", input " +
                           std::string(c10::toString(input.scalar_type())));
}

void Communicator::require_peer(triax_group group, int peer, const char* operation) const {
  require_group(group, operation);
  const int group_size = size(group), own = rank(group);
  if (peer < 0 || peer >= group_size || peer == own)
    invalid(operation, "peer " + std::to_string(peer) + " is not another rank of the " + group_name(group) +
                           " group (this rank is " + std::to_string(own) + " of " + std::to_string(group_size) + ")");
}

void Communicator::all_reduce(triax_group group, const at::Tensor& tensor, triax_reduce_op op) {
  require_group(group, "all_reduce");
  require_tensor(tensor, "all_reduce", "tensor");
  require_reduce_op(op, "all_reduce");
  run_all_reduce(group, tensor, op);
}

std::unique_ptr<PendingOperation> Communicator::start_all_reduce(triax_group group, const at::Tensor& tensor,
                                                                 triax_reduce_op op) {
  require_group(group, "all_reduce");
  require_tensor(tensor, "all_reduce", "tensor");
  require_reduce_op(op, "all_reduce");
  return run_start_all_reduce(group, tensor, op);
}

void Communicator::require_all_gather(triax_group group, const at::Tensor& output, const at::Tensor& input) const {
  require_group(group, "all_gather");
  require_pair(output, input, "all_gather");
  const int n = size(group);
  require_numel(output, input.numel() * n, "all_gather",
                "the output (" + std::to_string(n) + " x the input's " + std::to_string(input.numel()) + ")");
}

void Communicator::all_gather(triax_group group, const at::Tensor& output, const at::Tensor& input) {
  require_all_gather(group, output, input);
  run_all_gather(group, output, input);
}

std::unique_ptr<PendingOperation> Communicator::start_all_gather(triax_group group, const at::Tensor& output,
                                                                 const at::Tensor& input) {
  require_all_gather(group, output, input);
  return run_start_all_gather(group, output, input);
}

void Communicator::reduce_scatter(triax_group group, const at::Tensor& output, const at::Tensor& input,
                                  triax_reduce_op op) {
  start_reduce_scatter(group, output, input, op)->wait();
}

std::unique_ptr<PendingOperation> Communicator::start_reduce_scatter(triax_group group, const at::Tensor& output,
                                                                     const at::Tensor& input, triax_reduce_op op) {
  require_group(group, "reduce_scatter");
  require_pair(output, input, "reduce_scatter");
  require_reduce_op(op, "reduce_scatter");
  const int n = size(group);
  require_numel(input, output.numel() * n, "reduce_scatter",
                "the input (" + std::to_string(n) + " x the output's " + std::to_string(output.numel()) + ")");
  return run_start_reduce_scatter(group, output, input, op);
}

void Communicator::broadcast(triax_group group, const at::Tensor& tensor, int root) {
  require_group(group, "broadcast");
  require_tensor(tensor, "broadcast", "tensor");
  if (root < 0 || root >= size(group))
    invalid("broadcast", "root " + std::to_string(root) + " is not a rank of the " + group_name(group) +
                             " group of size " + std::to_string(size(group)));
  run_broadcast(group, tensor, root);
}

void Communicator::all_to_all(triax_group group, const at::Tensor& output, const at::Tensor& input) {
  require_group(group, "all_to_all");
  require_pair(output, input, "all_to_all");
  require_numel(output, input.numel(), "all_to_all", "the output (as many as the input)");
  if (input.numel() % size(group) != 0)
    invalid("all_to_all", "the input's " + std::to_string(input.numel()) + " elements do not split evenly over the " +
                              group_name(group) + " group of size " + std::to_string(size(group)));
  run_all_to_all(group, output, input);
}

void Communicator::all_to_all_v(triax_group group, const at::Tensor& output, const at::Tensor& input,
                                const std::vector<int64_t>& output_splits, const std::vector<int64_t>& input_splits) {
  require_group(group, "all_to_all_v");
  require_pair(output, input, "all_to_all_v");
  if (input.dim() < 1 || output.dim() != input.dim() || output.sizes().slice(1) != input.sizes().slice(1))
    invalid("all_to_all_v", "output " + std::string(c10::str(output.sizes())) + " and input " +
                                std::string(c10::str(input.sizes())) + " must have rows of one shape");
  require_splits(input_splits, input, size(group), "input");
  require_splits(output_splits, output, size(group), "output");
  run_all_to_all_v(group, output, input, output_splits, input_splits);
}

void Communicator::send(triax_group group, const at::Tensor& tensor, int peer) {
  require_peer(group, peer, "send");
  require_tensor(tensor, "send", "tensor");
  run_send(group, tensor, peer);
}

void Communicator::recv(triax_group group, const at::Tensor& tensor, int peer) {
  require_peer(group, peer, "recv");
  require_tensor(tensor, "recv", "tensor");
  run_recv(group, tensor, peer);
}

std::unique_ptr<PendingOperation> Communicator::start_send_recv(triax_group group, const at::Tensor& send,
                                                                int send_peer, const at::Tensor& recv, int recv_peer) {
  require_peer(group, send_peer, "send_recv");
  require_peer(group, recv_peer, "send_recv");
  require_tensor(send, "send_recv", "sent tensor");
  require_tensor(recv, "send_recv", "received tensor");
  if (send.scalar_type() != recv.scalar_type())
    invalid("send_recv", "the sent tensor is " + std::string(c10::toString(send.scalar_type())) +
                             ", the received one " + std::string(c10::toString(recv.scalar_type())));
  return run_start_send_recv(group, send, send_peer, recv, recv_peer);
}

void Communicator::barrier(triax_group group) {
  require_group(group, "barrier");
  run_barrier(group);
}

void SingleProcessCommunicator::run_all_gather(triax_group, const at::Tensor& output, const at::Tensor& input) {
  output.view_as(input).copy_(input);
}

void SingleProcessCommunicator::run_reduce_scatter(triax_group, const at::Tensor& output, const at::Tensor& input,
                                                   triax_reduce_op) {
  output.view_as(input).copy_(input);
}

void SingleProcessCommunicator::run_all_to_all(triax_group, const at::Tensor& output, const at::Tensor& input) {
  output.view_as(input).copy_(input);
}

void SingleProcessCommunicator::run_all_to_all_v(triax_group, const at::Tensor& output, const at::Tensor& input,
                                                 const std::vector<int64_t>&, const std::vector<int64_t>&) {
  output.copy_(input);  // the checks made both splits [rows]
}

}  // namespace triax

namespace triax {

int64_t world_reduce(Communicator& communicator, int64_t value, triax_reduce_op op) {
  if (communicator.size(TRIAX_GROUP_WORLD) == 1) return value;
  at::TensorOptions options = at::TensorOptions().dtype(at::kLong);
  if (std::string(communicator.backend_name()) == "nccl") options = options.device(at::kCUDA);
  at::Tensor flag = at::full({1}, value, options);
  communicator.all_reduce(TRIAX_GROUP_WORLD, flag, op);
  return flag.item<int64_t>();
}

}  // namespace triax
