#include "grouped_experts.hpp"

#include <ATen/ATen.h>
#ifdef TRIAX_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include <numeric>

#include "triax/layers/fused_ops.hpp"
#include "triax/layers/tensor_parallel_ops.hpp"

namespace triax::moe {

GroupedExperts::GroupedExperts(int64_t num_experts, int64_t hidden_size, int64_t intermediate_size,
                               ExpertActivation activation, const ModelContext& context)
    : local_experts_(num_experts / context.ep_size),
      first_expert_(context.ep_rank * (num_experts / context.ep_size)),
      tp_(TensorParallel::of(context)) {
  const at::TensorOptions options = at::TensorOptions().device(context.device).dtype(context.dtype);
  auto add = [&](const char* name, int64_t out, int64_t in) {
    at::Tensor value = at::empty({local_experts_, out, in}, options);
    at::Tensor registered = register_parameter_with_spec(
        name, value, ParameterSpec::sharded({num_experts, out, in}, 0, first_expert_,
                                                    TRIAX_PARAM_TP_REPLICATED, ParameterRole::Matrix));
    mark_expert(name);
    return registered;
  };
  if (activation == ExpertActivation::SwiGlu) gate_proj = add("gate_proj", intermediate_size, hidden_size);
  up_proj = add("up_proj", intermediate_size, hidden_size);
  down_proj = add("down_proj", hidden_size, intermediate_size);
}

at::Tensor GroupedExperts::forward(const at::Tensor& rows, const std::vector<int64_t>& counts) {
  // In REDUCE_SCATTER mode each tp rank's ep group serves that rank's sequence shard: the
  // weights' gradients are summed over tp, as a norm weight's are.
  const at::Tensor gate = gate_proj.defined() ? replicated_on_sequence_shard(gate_proj, tp_) : at::Tensor();
  const at::Tensor up = replicated_on_sequence_shard(up_proj, tp_);
  const at::Tensor down = replicated_on_sequence_shard(down_proj, tp_);
  if (grouped_mm_applies(rows, up)) return experts_grouped_mm(rows, counts, gate, up, down);
  return experts_loop(rows, counts, gate, up, down);
}

at::Tensor experts_loop(const at::Tensor& rows, const std::vector<int64_t>& counts, const at::Tensor& gate,
                        const at::Tensor& up, const at::Tensor& down) {
  std::vector<at::Tensor> outputs;
  outputs.reserve(counts.size());
  int64_t start = 0;
  // Experts without rows run too (on zero rows): every weight stays in the graph and gets a
  // zero gradient rather than none.
  for (size_t e = 0; e < counts.size(); ++e) {
    const at::Tensor x = rows.narrow(0, start, counts[e]);
    const auto i = static_cast<int64_t>(e);
    const at::Tensor u = at::matmul(x, up[i].t());
    const at::Tensor activated = gate.defined() ? swiglu(at::matmul(x, gate[i].t()), u) : at::square(at::relu(u));
    outputs.push_back(at::matmul(activated, down[i].t()));
    start += counts[e];
  }
  return at::cat(outputs, 0);
}

at::Tensor experts_grouped_mm(const at::Tensor& rows, const std::vector<int64_t>& counts, const at::Tensor& gate,
                              const at::Tensor& up, const at::Tensor& down) {
  // offs[e]: the end row of expert e (int32, cumulative), as _grouped_mm takes the groups.
  std::vector<int32_t> ends(counts.size());
  int64_t end = 0;
  for (size_t e = 0; e < counts.size(); ++e) ends[e] = static_cast<int32_t>(end += counts[e]);
  const at::Tensor offs = at::tensor(ends, at::TensorOptions().dtype(at::kInt)).to(rows.device(), /*non_blocking=*/true);
  // [E, out, in] transposed to [E, in, out]: a view, column-major per expert, which the kernel takes.
  const at::Tensor u = at::_grouped_mm(rows, up.transpose(-2, -1), offs);
  const at::Tensor activated =
      gate.defined() ? swiglu(at::_grouped_mm(rows, gate.transpose(-2, -1), offs), u) : at::square(at::relu(u));
  return at::_grouped_mm(activated, down.transpose(-2, -1), offs);
}

bool grouped_mm_applies(const at::Tensor& rows, const at::Tensor& up) {
  if (!rows.is_cuda() || rows.scalar_type() != at::kBFloat16 || up.scalar_type() != at::kBFloat16) return false;
  if (rows.size(-1) % 8 != 0 || up.size(1) % 8 != 0) return false;
#ifdef TRIAX_WITH_CUDA
  return at::cuda::getDeviceProperties(rows.device().index())->major >= 9;
#else
  return false;
#endif
}

}  // namespace triax::moe
