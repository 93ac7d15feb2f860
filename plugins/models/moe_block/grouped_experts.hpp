// This ep rank's experts: SwiGLU feed-forward blocks down(silu(gate(x)) * up(x)), or squared-ReLU
// ones down(relu(up(x))^2) without a gate projection, stored as one tensor per projection,
// [local experts, out, in] (nn.Linear's layout per expert), sharded over the ep group along dim 0
// and replicated over tp and edp.
//
// forward() takes the rows routed to this rank grouped by local expert. On a CUDA device, in
// bf16, with sizes the kernel accepts, each projection is one grouped GEMM (at::_grouped_mm, all
// experts in one call); otherwise it is a loop of one matmul per expert (the CPU path). Both are
// differentiable and compute the same function (tests/moe_grouped_gemm_cuda_test.cpp). Chosen for
// fp8 (fp8.recipe rowwise, docs/fp8.md), the projections run as grouped fp8 products
// (at::_scaled_grouped_mm, triax/layers/fp8_grouped_linear.hpp) where they can, else (the CPU, a
// GPU other than sm_90/sm_100) as before, with the reason logged once.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "moe_block_options.hpp"
#include "triax/layers/fp8_grouped_linear.hpp"
#include "triax/layers/tensor_parallel.hpp"
#include "triax/model.hpp"
#include "triax/parameter.hpp"

namespace triax::moe {

class GroupedExperts : public SpecifiedModule, public Fp8GroupedProducts {
 public:
  // num_experts: all experts of the layer; this rank holds num_experts / ep_size of them.
  GroupedExperts(int64_t num_experts, int64_t hidden_size, int64_t intermediate_size, ExpertActivation activation,
                 const ModelContext& context);

  // rows: [sum(counts), hidden], the first counts[0] rows for local expert 0, and so on;
  // counts: one per local expert (0 allowed) -> [sum(counts), hidden].
  at::Tensor forward(const at::Tensor& rows, const std::vector<int64_t>& counts);

  // At a decoding step: row r of rows [m, hidden] through local expert experts[r] (int64 [m], on
  // the rows' device), each row's matrices read where they lie (triax/layers/decode_experts.hpp).
  // Inference only.
  at::Tensor forward_by_expert(const at::Tensor& rows, const at::Tensor& experts);

  // Fp8GroupedProducts: the sides of the projections, [intermediate, hidden].
  std::array<int64_t, 2> fp8_product_sides() const override;
  void compute_grouped_in_fp8(const std::string& name) override;
  bool computes_in_fp8() const { return fp8_; }

  int64_t local_experts() const { return local_experts_; }
  int64_t first_expert() const { return first_expert_; }

  at::Tensor gate_proj, up_proj;  // [local experts, intermediate, hidden]; gate_proj SwiGLU only
  at::Tensor down_proj;           // [local experts, hidden, intermediate]

 private:
  int64_t local_experts_, first_expert_;
  TensorParallel tp_;
  bool fp8_ = false;
};

// The implementations, on explicit weights (tests compare them); an undefined gate: the
// squared-ReLU experts.
at::Tensor experts_loop(const at::Tensor& rows, const std::vector<int64_t>& counts, const at::Tensor& gate,
                        const at::Tensor& up, const at::Tensor& down);
at::Tensor experts_grouped_mm(const at::Tensor& rows, const std::vector<int64_t>& counts, const at::Tensor& gate,
                              const at::Tensor& up, const at::Tensor& down);
// Each expert's rows padded with zero rows to a positive multiple of 16 (Fp8RowGroups): the
// padded rows, their groups, and where each given row lies among them.
struct PaddedRows {
  Fp8RowGroups groups;
  at::Tensor where;  // int64 [rows given]: the padded row of each
  at::Tensor rows;   // [groups.total(), hidden]
};
PaddedRows pad_to_row_groups(const at::Tensor& rows, const std::vector<int64_t>& counts);

// The fp8 path: each expert's rows padded with zero rows to a positive multiple of 16
// (Fp8RowGroups), the projections through fp8_grouped_linear (gate and up as one), the padding
// dropped again.
at::Tensor experts_fp8_grouped_mm(const at::Tensor& rows, const std::vector<int64_t>& counts, const at::Tensor& gate,
                                  const at::Tensor& up, const at::Tensor& down);
// Whether experts_grouped_mm runs on these operands: CUDA, bf16, compute capability 9.0 or later,
// every inner dimension a multiple of 8 (16-byte strides).
bool grouped_mm_applies(const at::Tensor& rows, const at::Tensor& up);

}  // namespace triax::moe
