// The amax of a weight from the optimizer kernel that writes it (docs/fp8.md, "The amax from the
// producer"): an optimizer that rounds its fp32 masters into the parameters can take each
// weight's max |value| on the way and record it, so that the weight's fp8 cast at the next step
// needs no amax pass of its own.
#pragma once

#include <ATen/core/Tensor.h>

namespace triax {

// Whether an fp8 cast would take a weight's amax from a record: some layer of this process
// computes in tensorwise fp8 (convert_linears_to_fp8) and TRIAX_FP8_PRODUCER_AMAX is not 0.
bool fp8_weight_amaxes_wanted();

// max |weight| is the max of `amax_slots`: 32 fp32 on weight's device that the kernel writing
// weight filled (in stream order). Found by the weight's cast while weight is not written again
// in place (its version counter).
void record_fp8_weight_amax(const at::Tensor& weight, const at::Tensor& amax_slots);

}  // namespace triax
