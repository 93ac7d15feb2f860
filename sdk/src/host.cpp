#include "triax/host.hpp"

#include <cstddef>

#include "triax/error.hpp"
#include "triax/tensor_handle.hpp"

namespace triax {
namespace {

const triax_host& require(const triax_host* host) {
  if (host == nullptr) throw Error("no host services: this object was built outside a triax run");
  return *host;
}

// Whether the host's table reaches `member` (at `offset`, `size` bytes): it was built for an ABI
// that has it.
bool provides(const triax_host& host, size_t offset, size_t size, const void* member) {
  return host.struct_size >= offset + size && member != nullptr;
}

}  // namespace

#define TRIAX_HOST_PROVIDES(host, member) \
  provides(host, offsetof(triax_host, member), sizeof(triax_host::member), reinterpret_cast<const void*>(host.member))

PendingCollective::~PendingCollective() {
  if (pending_ == nullptr) return;
  triax_error error{};
  host_->finish(host_->self, pending_, &error);  // an error here was, or will be, reported elsewhere
}

void PendingCollective::wait() {
  if (pending_ == nullptr) return;
  triax_pending* pending = pending_;
  pending_ = nullptr;
  triax_error error{};
  throw_if_failed(host_->finish(host_->self, pending, &error), error);
}

PendingCollective Host::start_all_reduce(triax_group group, const at::Tensor& tensor, triax_reduce_op op) const {
  const triax_host& h = require(host_);
  if (!TRIAX_HOST_PROVIDES(h, start_all_reduce)) {
    all_reduce(group, tensor, op);
    return {};
  }
  triax_error error{};
  triax_pending* pending = nullptr;
  throw_if_failed(h.start_all_reduce(h.self, group, borrow_handle(tensor), op, &pending, &error), error);
  return {host_, pending};
}

PendingCollective Host::start_all_gather(triax_group group, const at::Tensor& output, const at::Tensor& input) const {
  const triax_host& h = require(host_);
  if (!TRIAX_HOST_PROVIDES(h, start_all_gather)) {
    all_gather(group, output, input);
    return {};
  }
  triax_error error{};
  triax_pending* pending = nullptr;
  throw_if_failed(h.start_all_gather(h.self, group, borrow_handle(output), borrow_handle(input), &pending, &error),
                  error);
  return {host_, pending};
}

PendingCollective Host::start_reduce_scatter(triax_group group, const at::Tensor& output, const at::Tensor& input,
                                             triax_reduce_op op) const {
  const triax_host& h = require(host_);
  if (!TRIAX_HOST_PROVIDES(h, start_reduce_scatter)) {
    reduce_scatter(group, output, input, op);
    return {};
  }
  triax_error error{};
  triax_pending* pending = nullptr;
  throw_if_failed(
      h.start_reduce_scatter(h.self, group, borrow_handle(output), borrow_handle(input), op, &pending, &error), error);
  return {host_, pending};
}

PendingCollective Host::start_send_recv(triax_group group, const at::Tensor& send, int send_peer,
                                        const at::Tensor& recv, int recv_peer) const {
  const triax_host& h = require(host_);
  if (!TRIAX_HOST_PROVIDES(h, start_send_recv))
    throw Error(TRIAX_ERROR_UNSUPPORTED, "triax_host.start_send_recv: this host predates ABI 1.10 (no ring steps)");
  triax_error error{};
  triax_pending* pending = nullptr;
  throw_if_failed(h.start_send_recv(h.self, group, borrow_handle(send), send_peer, borrow_handle(recv), recv_peer,
                                    &pending, &error),
                  error);
  return {host_, pending};
}

void Host::log(triax_log_level level, const std::string& message) const {
  if (host_ != nullptr && host_->log != nullptr) host_->log(host_->self, level, message.c_str());
}

int Host::rank(triax_group group) const { return host_ == nullptr ? 0 : host_->group_rank(host_->self, group); }

int Host::size(triax_group group) const { return host_ == nullptr ? 1 : host_->group_size(host_->self, group); }

void Host::all_reduce(triax_group group, const at::Tensor& tensor, triax_reduce_op op) const {
  const triax_host& h = require(host_);
  triax_error error{};
  throw_if_failed(h.all_reduce(h.self, group, borrow_handle(tensor), op, &error), error);
}

void Host::all_gather(triax_group group, const at::Tensor& output, const at::Tensor& input) const {
  const triax_host& h = require(host_);
  triax_error error{};
  throw_if_failed(h.all_gather(h.self, group, borrow_handle(output), borrow_handle(input), &error), error);
}

void Host::reduce_scatter(triax_group group, const at::Tensor& output, const at::Tensor& input,
                          triax_reduce_op op) const {
  const triax_host& h = require(host_);
  triax_error error{};
  throw_if_failed(h.reduce_scatter(h.self, group, borrow_handle(output), borrow_handle(input), op, &error), error);
}

void Host::broadcast(triax_group group, const at::Tensor& tensor, int root) const {
  const triax_host& h = require(host_);
  triax_error error{};
  throw_if_failed(h.broadcast(h.self, group, borrow_handle(tensor), root, &error), error);
}

void Host::all_to_all(triax_group group, const at::Tensor& output, const at::Tensor& input) const {
  const triax_host& h = require(host_);
  triax_error error{};
  throw_if_failed(h.all_to_all(h.self, group, borrow_handle(output), borrow_handle(input), &error), error);
}

void Host::all_to_all_v(triax_group group, const at::Tensor& output, const at::Tensor& input,
                        const std::vector<int64_t>& output_splits, const std::vector<int64_t>& input_splits) const {
  const triax_host& h = require(host_);
  if (!TRIAX_HOST_PROVIDES(h, all_to_all_v))
    throw Error(TRIAX_ERROR_UNSUPPORTED, "all_to_all_v: the host is older than ABI 1.3 and has no variable all-to-all");
  const size_t ranks = static_cast<size_t>(size(group));
  if (output_splits.size() != ranks || input_splits.size() != ranks)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "all_to_all_v: " + std::to_string(output_splits.size()) + " output and " +
                                                  std::to_string(input_splits.size()) + " input splits for a group of " +
                                                  std::to_string(ranks));
  triax_error error{};
  throw_if_failed(h.all_to_all_v(h.self, group, borrow_handle(output), borrow_handle(input), output_splits.data(),
                                 input_splits.data(), &error),
                  error);
}

void Host::send(triax_group group, const at::Tensor& tensor, int peer) const {
  const triax_host& h = require(host_);
  triax_error error{};
  throw_if_failed(h.send(h.self, group, borrow_handle(tensor), peer, &error), error);
}

void Host::recv(triax_group group, const at::Tensor& tensor, int peer) const {
  const triax_host& h = require(host_);
  triax_error error{};
  throw_if_failed(h.recv(h.self, group, borrow_handle(tensor), peer, &error), error);
}

void Host::barrier(triax_group group) const {
  const triax_host& h = require(host_);
  triax_error error{};
  throw_if_failed(h.barrier(h.self, group, &error), error);
}

}  // namespace triax
