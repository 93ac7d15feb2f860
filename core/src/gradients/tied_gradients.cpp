#include "gradients/tied_gradients.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>

#include "triax/core/comm/communicator.hpp"
#include "triax/error.hpp"

namespace triax {
namespace {

// FNV-1a: a stable 63-bit fingerprint of a tied key, equal in every process.
int64_t fingerprint(const std::string& key) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : key) hash = (hash ^ c) * 1099511628211ull;
  return static_cast<int64_t>(hash >> 1) | 1;  // positive and never 0 (0 pads the exchange)
}

}  // namespace

TiedGradients::TiedGradients(const std::vector<NamedParameter>& parameters, Communicator& communicator)
    : communicator_(communicator), pp_rank_(communicator.rank(TRIAX_GROUP_PP)), parameter_count_(parameters.size()) {
  std::map<std::string, size_t> mine;
  for (size_t i = 0; i < parameters.size(); ++i)
    if (parameters[i].spec.flags & TRIAX_PARAM_TIED) mine.emplace(parameters[i].spec.tied_key, i);

  const int pp_size = communicator.size(TRIAX_GROUP_PP);
  if (pp_size == 1) {
    for (const auto& [key, index] : mine) ties_.push_back({index, key, {0}});
    return;
  }
  // Every pipeline rank learns every other's tied keys (as fingerprints), padded to the
  // largest count.
  // On the parameters' device: the nccl backend moves only CUDA tensors.
  const at::TensorOptions on_device = at::TensorOptions().dtype(at::kLong).device(
      parameters.empty() ? c10::Device(c10::kCPU) : parameters.front().tensor.device());
  at::Tensor count = at::full({1}, static_cast<int64_t>(mine.size()), on_device);
  communicator.all_reduce(TRIAX_GROUP_PP, count, TRIAX_REDUCE_MAX);
  const int64_t capacity = count.item<int64_t>();
  if (capacity == 0) return;
  at::Tensor keys = at::zeros({capacity}, at::kLong);
  int64_t slot = 0;
  for (const auto& entry : mine) keys[slot++] = fingerprint(entry.first);
  at::Tensor all_keys = at::zeros({capacity * pp_size}, on_device);
  communicator.all_gather(TRIAX_GROUP_PP, all_keys, keys.to(on_device.device()));
  all_keys = all_keys.cpu();
  auto all = all_keys.accessor<int64_t, 1>();
  for (const auto& [key, index] : mine) {
    Tie tie{index, key, {}};
    for (int rank = 0; rank < pp_size; ++rank)
      for (int64_t k = 0; k < capacity; ++k)
        if (all[rank * capacity + k] == fingerprint(key)) tie.holders.push_back(rank);
    ties_.push_back(std::move(tie));
  }
}

void TiedGradients::sum(const std::vector<at::Tensor>& gradients) const {
  if (gradients.size() != parameter_count_)
    throw Error("tied gradients: " + std::to_string(gradients.size()) + " gradients for " +
                std::to_string(parameter_count_) + " parameters");
  for (const Tie& tie : ties_) {
    if (tie.holders.size() < 2) continue;
    const at::Tensor& gradient = gradients[tie.parameter];
    // Each holder sends its gradient to every other and receives theirs. Pairs are visited in
    // one global order (lower rank sends first), which cannot deadlock even with blocking sends.
    std::map<int, at::Tensor> contributions{{pp_rank_, gradient.clone()}};
    for (size_t a = 0; a < tie.holders.size(); ++a)
      for (size_t b = a + 1; b < tie.holders.size(); ++b) {
        const int low = tie.holders[a], high = tie.holders[b];
        if (pp_rank_ != low && pp_rank_ != high) continue;
        const int peer = pp_rank_ == low ? high : low;
        at::Tensor received = at::empty_like(gradient);
        if (pp_rank_ == low) {
          communicator_.send(TRIAX_GROUP_PP, contributions.at(pp_rank_), peer);
          communicator_.recv(TRIAX_GROUP_PP, received, peer);
        } else {
          communicator_.recv(TRIAX_GROUP_PP, received, peer);
          communicator_.send(TRIAX_GROUP_PP, contributions.at(pp_rank_), peer);
        }
        contributions.emplace(peer, std::move(received));
      }
    // The same order of additions on every holder: the copies stay bit-identical.
    at::Tensor total = at::zeros_like(gradient);
    for (const auto& [rank, contribution] : contributions) total.add_(contribution);
    gradient.copy_(total);
  }
}

bool TiedGradients::counts_in_norm(const std::string& key) const {
  for (const Tie& tie : ties_)
    if (tie.key == key) return tie.holders.front() == pp_rank_;
  return true;
}

std::string TiedGradients::describe() const {
  std::string text;
  for (const Tie& tie : ties_) {
    if (!text.empty()) text += "; ";
    text += tie.key + " on pipeline ranks";
    for (int rank : tie.holders) text += " " + std::to_string(rank);
  }
  return text;
}

std::vector<bool> TiedGradients::tied_parameters() const {
  std::vector<bool> tied(parameter_count_, false);
  for (const Tie& tie : ties_) tied[tie.parameter] = true;
  return tied;
}

}  // namespace triax
