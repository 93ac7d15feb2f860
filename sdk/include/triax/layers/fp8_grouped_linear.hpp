// Grouped products y_g = x_g W_g^T in fp8 with rowwise scales (docs/fp8.md, "The MoE experts"):
// the rows of x come in groups, group g multiplied by weights[g]. Forward and both backward
// products (grad_x = gy_g W_g, grad_W_g = gy_g^T x_g) each run as one at::_scaled_grouped_mm
// (CUTLASS, e4m3 operands, fp32 scales along each product's contraction, bf16 out; CUDA compute
// capability 9.x and 10.x), as the dense rowwise recipe (triax/layers/fp8_linear.hpp) scales them:
//
//   product       scale of a                      scale of b
//   y = x W^T     x per row [M]                   W per row [E, N] (over K)
//   gx = gy W     gy per row [M]                  W per column [E, K] (over N)
//   gW = gy^T x   gy per column and group [E, N]  x per column and group [E, K] (over the group's rows)
//
// On the CPU the products are emulated (the same fp8 values and scales, dequantised, multiplied in
// fp32), so the CPU tests check the same arithmetic; models take the bf16 path there instead.
//
// The modules with grouped products (the MoE experts) implement Fp8GroupedProducts, through which
// convert_linears_to_fp8 (triax/fp8.hpp) chooses them by name as it chooses linears.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "triax/fp8_options.hpp"

namespace triax {

// A module whose grouped products can run in fp8 (rowwise only: the grouped kernel takes e4m3
// operands and rowwise scales, not the tensorwise recipe's e5m2 gradients).
class Fp8GroupedProducts {
 public:
  // Defined in the SDK: its type information lives there, so that the SDK's cast finds it in a
  // plugin's module (plugins hide their symbols).
  virtual ~Fp8GroupedProducts();
  // The N and K of the module's products (for fp8.min_gemm_size): the smaller side decides.
  virtual std::array<int64_t, 2> fp8_product_sides() const = 0;
  // Switches the products to fp8; refuses (naming fp8.linears, `name` and the shape) sides that
  // are not multiples of 16.
  virtual void compute_grouped_in_fp8(const std::string& name) = 0;
};

// The row groups of a grouped product: each group's row count a multiple of 16 and at least 16
// (the weight gradient's contraction runs over a group's rows: the kernel needs 16-byte steps and
// no empty group). Pad the rows to this layout with zero rows (exact: they add nothing).
struct Fp8RowGroups {
  std::vector<int64_t> rows;  // per group
  at::Tensor ends;            // int32 [groups] on the rows' device: the cumulative ends
  at::Tensor group_of_block;  // int64 [total rows / 16]: the group of each block of 16 rows

  // `rows` as given (checked); `device`: where the products run.
  static Fp8RowGroups of(std::vector<int64_t> rows, const c10::Device& device);
  // A group of `count` rows padded: a multiple of 16, at least 16.
  static int64_t padded(int64_t count);
  int64_t total() const;
};

// x [total rows, K] (bf16 on CUDA; any floating dtype on the CPU), weights [groups, N, K] ->
// [total rows, N] in x's dtype; differentiable in x and the weights. `more_weights` [groups, N2, K]:
// stacked after `weights` along N, both in one product ([total rows, N + N2]; the MoE experts'
// gate and up) without keeping their concatenation for backward.
at::Tensor fp8_grouped_linear(const at::Tensor& x, const at::Tensor& weights, const Fp8RowGroups& groups,
                              const at::Tensor& more_weights = {});

// Why fp8_grouped_linear cannot run on the GPU for these operands (not CUDA, not bf16, a compute
// capability other than 9.x or 10.x, or a side not a multiple of 16), or empty when it can.
std::string fp8_grouped_products_unavailable(const at::Tensor& x, const at::Tensor& weights);

// How many grouped fp8 products ran through at::_scaled_grouped_mm in this process (forward and
// backward alike): the tests' proof that the path was taken.
int64_t fp8_scaled_grouped_products();

}  // namespace triax
