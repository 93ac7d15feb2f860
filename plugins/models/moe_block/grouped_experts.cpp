#include "grouped_experts.hpp"

#include <ATen/ATen.h>
#ifdef TRIAX_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include <atomic>
#include <numeric>
#include <string>

#include "triax/error.hpp"
#include "triax/layers/decode_experts.hpp"
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
  if (fp8_) {
    const std::string unavailable = fp8_grouped_products_unavailable(rows, up);
    if (unavailable.empty()) return experts_fp8_grouped_mm(rows, counts, gate, up, down);
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      tp_.host.log(TRIAX_LOG_WARNING, std::string("fp8: the MoE experts compute in ") +
                                          c10::toString(rows.scalar_type()) + " instead: " + unavailable);
  }
  if (grouped_mm_applies(rows, up)) return experts_grouped_mm(rows, counts, gate, up, down);
  return experts_loop(rows, counts, gate, up, down);
}

at::Tensor GroupedExperts::forward_by_expert(const at::Tensor& rows, const at::Tensor& experts) {
  const at::Tensor activated = gate_proj.defined()
                                   ? decode_swiglu_by_expert(rows, gate_proj, up_proj, experts)
                                   : at::square(at::relu(decode_gemv_by_expert(rows, up_proj, experts)));
  return decode_gemv_by_expert(activated, down_proj, experts);
}

std::array<int64_t, 2> GroupedExperts::fp8_product_sides() const { return {up_proj.size(1), up_proj.size(2)}; }

void GroupedExperts::compute_grouped_in_fp8(const std::string& name) {
  const int64_t intermediate = up_proj.size(1), hidden = up_proj.size(2);
  if (intermediate % 16 != 0 || hidden % 16 != 0)
    throw Error(TRIAX_ERROR_INVALID_CONFIG, "fp8.linears: experts '" + name + "' are [intermediate " +
                                                std::to_string(intermediate) + ", hidden " + std::to_string(hidden) +
                                                "]; fp8 products need both in multiples of 16 (leave them out of "
                                                "fp8.linears, or train without fp8)");
  fp8_ = true;
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

PaddedRows pad_to_row_groups(const at::Tensor& rows, const std::vector<int64_t>& counts) {
  // Where each row goes in the padded layout. A zero row adds nothing to a weight's gradient and
  // the rows dropped at the end get no gradient: the padding is exact.
  std::vector<int64_t> padded(counts.size()), place;
  place.reserve(static_cast<size_t>(rows.size(0)));
  int64_t start = 0;
  for (size_t e = 0; e < counts.size(); ++e) {
    for (int64_t i = 0; i < counts[e]; ++i) place.push_back(start + i);
    padded[e] = Fp8RowGroups::padded(counts[e]);
    start += padded[e];
  }
  PaddedRows out{Fp8RowGroups::of(std::move(padded), rows.device()),
                 at::tensor(place, at::TensorOptions().dtype(at::kLong)).to(rows.device(), true), at::Tensor()};
  out.rows = at::zeros({start, rows.size(1)}, rows.options()).index_copy(0, out.where, rows);
  return out;
}

at::Tensor experts_fp8_grouped_mm(const at::Tensor& rows, const std::vector<int64_t>& counts, const at::Tensor& gate,
                                  const at::Tensor& up, const at::Tensor& down) {
  const PaddedRows padded = pad_to_row_groups(rows, counts);
  const Fp8RowGroups& groups = padded.groups;
  // Gate and up as one product over [E, 2 x intermediate, hidden], as the dense MLP's fused
  // gate_up: x is quantised once and one grouped product runs instead of two, each way.
  const at::Tensor activated = gate.defined()
                                   ? swiglu_halves(fp8_grouped_linear(padded.rows, gate, groups, /*more_weights=*/up))
                                   : at::square(at::relu(fp8_grouped_linear(padded.rows, up, groups)));
  return fp8_grouped_linear(activated, down, groups).index_select(0, padded.where);
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
