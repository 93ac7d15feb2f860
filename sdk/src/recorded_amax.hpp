// The amax of a tensor as the kernel that produced it computed it (the amax slots of
// triax/kernels/kernels.hpp), kept beside the tensor so that the fp8 product which consumes it
// takes its scale from there instead of reading the tensor once more (docs/fp8.md, "The amax from
// the producer"). A record is found only for the very elements recorded (tensor_identity.hpp): the
// same live storage and place, contiguous (any shape: the fp8 linear reshapes its input to rows),
// not written in place since. Anything else (a gathered or copied tensor, a slice, a tensor written
// again) has no record, and the consumer computes the amax itself as before.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>

namespace triax::fp8 {

// Records that max |t| is the max of `amax_slots` (fp32 on t's device, filled by the kernel that
// wrote t, in stream order). Inference tensors (no version counter) and non-contiguous ones are
// not recorded.
void record_amax(const at::Tensor& t, const at::Tensor& amax_slots);

// The amax slots recorded for t, or an undefined tensor.
at::Tensor recorded_amax(const at::Tensor& t);

// Whether producers compute and record amaxes: true unless the environment sets
// TRIAX_FP8_PRODUCER_AMAX=0 (read at each decision, so that a comparison can switch it in one
// process; the fp8 products then take their own amax passes, as before).
bool producer_amax_enabled();

// How many records are held (expired ones are dropped as new ones come), and how many times
// recorded_amax has found one since the process started (what a comparison checks).
size_t recorded_amax_count();
size_t recorded_amax_uses();

}  // namespace triax::fp8
