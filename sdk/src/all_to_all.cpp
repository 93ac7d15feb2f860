// The differentiable variable all-to-all (triax/layers/all_to_all.hpp).
#include "triax/layers/all_to_all.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <numeric>

#include "triax/error.hpp"

namespace triax {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

int64_t total(const std::vector<int64_t>& splits) { return std::accumulate(splits.begin(), splits.end(), int64_t{0}); }

at::Tensor exchange(const at::Tensor& x, const std::vector<int64_t>& output_splits,
                    const std::vector<int64_t>& input_splits, triax_group group, const Host& host) {
  std::vector<int64_t> shape = x.sizes().vec();
  shape[0] = total(output_splits);
  at::Tensor out = at::empty(shape, x.options());
  host.all_to_all_v(group, out, x.contiguous(), output_splits, input_splits);
  return out;
}

class AllToAllV : public torch::autograd::Function<AllToAllV> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const std::vector<int64_t>& output_splits,
                            const std::vector<int64_t>& input_splits, int64_t group, const Host& host) {
    // AutogradContext keeps non-tensor state as IValues: the host table travels as its address.
    ctx->saved_data["host"] = static_cast<int64_t>(reinterpret_cast<std::uintptr_t>(host.c_host()));
    ctx->saved_data["group"] = group;
    ctx->saved_data["output_splits"] = output_splits;
    ctx->saved_data["input_splits"] = input_splits;
    return exchange(x, output_splits, input_splits, static_cast<triax_group>(group), host);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const Host host(reinterpret_cast<const triax_host*>(static_cast<std::uintptr_t>(ctx->saved_data["host"].toInt())));
    const auto group = static_cast<triax_group>(ctx->saved_data["group"].toInt());
    const std::vector<int64_t> output_splits = ctx->saved_data["output_splits"].toIntVector();
    const std::vector<int64_t> input_splits = ctx->saved_data["input_splits"].toIntVector();
    // What came from rank j goes back to rank j: the splits swap roles.
    return {exchange(grads[0], input_splits, output_splits, group, host), at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

at::Tensor all_to_all_v(const at::Tensor& x, const std::vector<int64_t>& output_splits,
                        const std::vector<int64_t>& input_splits, triax_group group, const Host& host) {
  if (x.dim() < 1)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "all_to_all_v: expected rows along dim 0, got a 0-dimensional tensor");
  if (host.size(group) == 1) {
    if (total(input_splits) != x.size(0) || total(output_splits) != x.size(0))
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "all_to_all_v: in a group of one, both splits must be the " +
                                                    std::to_string(x.size(0)) + " rows of the input");
    return x;
  }
  return AllToAllV::apply(x, output_splits, input_splits, static_cast<int64_t>(group), host);
}

std::vector<int64_t> exchange_split_sizes(const std::vector<int64_t>& input_splits, triax_group group,
                                          const Host& host, const c10::Device& device) {
  if (host.size(group) == 1) return input_splits;
  at::Tensor sending = at::tensor(input_splits, at::TensorOptions().dtype(at::kLong)).to(device);
  at::Tensor receiving = at::empty_like(sending);
  host.all_to_all(group, receiving, sending);
  receiving = receiving.cpu();
  return std::vector<int64_t>(receiving.data_ptr<int64_t>(), receiving.data_ptr<int64_t>() + receiving.numel());
}

}  // namespace triax
