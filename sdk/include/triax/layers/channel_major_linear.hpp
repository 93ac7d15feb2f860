// A linear layer's product on a channel-major input: x [b, in, s] (the layout of the Mamba
// mixer's scan output) times matrixᵀ gives [b, s, out], the layout between blocks. cuBLAS reads
// x transposed in place, so neither direction makes a transposing copy: forward and the input's
// gradient are batched products sharing the matrix (a zero batch stride), and the input's
// gradient is written [b, in, s], as the kernels that produced x read it. Through autograd on a
// transposed view, that gradient would be a strided [b, s, in] tensor copied by its consumer.
#pragma once

#include <ATen/core/Tensor.h>

namespace triax {

// x [b, in, s], matrix [out, in] (any strides) -> [b, s, out] contiguous, in x's dtype. The
// weight's gradient is the sum over the batch rows of grad[i]ᵀ x[i]ᵀ (accumulated in fp32 for
// reduced dtypes), deferred as deferrable_linear's (triax/layers/deferred_weight_gradients.hpp).
at::Tensor channel_major_linear(const at::Tensor& x, const at::Tensor& matrix);

}  // namespace triax
