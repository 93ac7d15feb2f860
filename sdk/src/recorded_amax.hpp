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

// fp32 zeros for a kernel to fold its output's amax into (kernels.hpp, kAmaxSlots) on like's
// device, or (not wanted, switched off, or under inference mode, whose tensors are not recorded)
// an undefined tensor, which the kernel reads as null.
at::Tensor amax_slots_if(bool wanted, const at::Tensor& like);
// After the launch that filled `slots` (if defined): the amax of t is theirs.
void record_amax_if(const at::Tensor& t, const at::Tensor& slots);

// The amax slots recorded for t, or an undefined tensor.
at::Tensor recorded_amax(const at::Tensor& t);

// Whether producers compute and record amaxes: true unless the environment sets
// TRIAX_FP8_PRODUCER_AMAX=0 (read at each decision, so that a comparison can switch it in one
// process; the fp8 products then take their own amax passes, as before).
bool producer_amax_enabled();

// How many records are held (expired ones are dropped as new ones come), and how many times
// recorded_amax has found one, or found none (the consumer then takes an amax pass of its own),
// since the process started (what a comparison checks).
size_t recorded_amax_count();
size_t recorded_amax_uses();
size_t recorded_amax_misses();

}  // namespace triax::fp8
