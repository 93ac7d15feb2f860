// C++ view of the host services (triax_host): logging and collectives over the mesh's groups.
// Plugins use it through the SDK's parallel layers; model code never calls it directly.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "triax/abi.h"

namespace triax {

// A collective started by Host::start_* (ABI 1.6): wait() finishes it, once; after that the
// result is in the tensors given to start_* (on CUDA, for work queued on the current stream).
// One dropped unwaited (an exception on the way) is finished by the destructor, its error
// swallowed.
class PendingCollective {
 public:
  PendingCollective() = default;  // nothing in flight (the host ran the operation to the end)
  PendingCollective(const triax_host* host, triax_pending* pending) : host_(host), pending_(pending) {}
  PendingCollective(PendingCollective&& other) noexcept : host_(other.host_), pending_(other.pending_) {
    other.pending_ = nullptr;
  }
  PendingCollective& operator=(PendingCollective&&) = delete;
  PendingCollective(const PendingCollective&) = delete;
  ~PendingCollective();
  void wait();

 private:
  const triax_host* host_ = nullptr;
  triax_pending* pending_ = nullptr;
};

class Host {
 public:
  Host() = default;
  explicit Host(const triax_host* host) : host_(host) {}

  bool valid() const { return host_ != nullptr; }
  const triax_host* c_host() const { return host_; }

  void log(triax_log_level level, const std::string& message) const;
  int rank(triax_group group) const;
  int size(triax_group group) const;

  void all_reduce(triax_group group, const at::Tensor& tensor, triax_reduce_op op = TRIAX_REDUCE_SUM) const;
  void all_gather(triax_group group, const at::Tensor& output, const at::Tensor& input) const;
  void reduce_scatter(triax_group group, const at::Tensor& output, const at::Tensor& input,
                      triax_reduce_op op = TRIAX_REDUCE_SUM) const;
  void broadcast(triax_group group, const at::Tensor& tensor, int root) const;
  void all_to_all(triax_group group, const at::Tensor& output, const at::Tensor& input) const;
  // Variable dim-0 splits (ABI 1.3): input_splits[j] rows go to rank j of the group,
  // output_splits[j] rows come from it. Not differentiable: see triax/layers/all_to_all.hpp.
  void all_to_all_v(triax_group group, const at::Tensor& output, const at::Tensor& input,
                    const std::vector<int64_t>& output_splits, const std::vector<int64_t>& input_splits) const;
  // Started without waiting (ABI 1.6; an older host runs them to the end here). The tensors stay
  // untouched until the returned operation's wait().
  PendingCollective start_all_reduce(triax_group group, const at::Tensor& tensor,
                                     triax_reduce_op op = TRIAX_REDUCE_SUM) const;
  PendingCollective start_all_gather(triax_group group, const at::Tensor& output, const at::Tensor& input) const;
  PendingCollective start_reduce_scatter(triax_group group, const at::Tensor& output, const at::Tensor& input,
                                         triax_reduce_op op = TRIAX_REDUCE_SUM) const;
  // One step of a ring (ABI 1.10): `send` to group rank send_peer and `recv` from recv_peer,
  // posted together so that neither blocks the other. Throws on an older host.
  PendingCollective start_send_recv(triax_group group, const at::Tensor& send, int send_peer, const at::Tensor& recv,
                                    int recv_peer) const;
  void send(triax_group group, const at::Tensor& tensor, int peer) const;
  void recv(triax_group group, const at::Tensor& tensor, int peer) const;
  void barrier(triax_group group) const;

 private:
  const triax_host* host_ = nullptr;
};

}  // namespace triax
