// A tensor that only an fp8 product reads, handed over as the recipe of its fp8 copy instead of
// its values (docs/fp8.md, "SwiGLU's gradient in fp8"). The producer (SwiGLU's backward, for the
// gate/up product's output gradient) would write the tensor in the model's dtype only for the
// product's quantise to read it back; instead it returns a stand-in of the tensor's shape, dtype
// and device and registers a function that writes the fp8 copy directly (with the consumer's
// scaling, so the scale's tp reduction stays the consumer's). fp8::quantise finds the function by
// the stand-in (through reshapes: autograd views the gradient to the product's rows) and calls it
// once. The stand-in holds no memory: one NaN broadcast over its shape, so that a reader that is
// not the product (never, where the producer is chosen) reads NaN, not plausible numbers.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <functional>

#include "fp8_matmul.hpp"

namespace triax::fp8 {

// Writes the fp8 copy of the tensor a stand-in replaces, as quantise(tensor, scaling, tp, layout)
// would (the same bytes and scale).
using DirectQuantiser = std::function<Fp8Matrix(const Scaling&, const TensorParallel&, Layout)>;

// A stand-in for a tensor of `sizes` and `options` whose fp8 copy `quantiser` writes. The record
// (and what the quantiser holds) lives until the quantiser is taken or, at the latest, until the
// next stand-in is made after the stand-in's death.
at::Tensor quantised_stand_in(at::IntArrayRef sizes, const at::TensorOptions& options, DirectQuantiser quantiser);

// Whether t is (a view of all the elements of) a stand-in whose quantiser has not been taken: the
// consumer then passes t on as it is (a contiguous copy would lose it).
bool is_quantised_stand_in(const at::Tensor& t);

// The quantiser of stand-in t, removed from the records (a stand-in is quantised once), or an
// empty function when t is none.
DirectQuantiser take_direct_quantiser(const at::Tensor& t);

// How many live stand-ins' quantisers are waiting, and how many have been taken since the process
// started (what a comparison checks).
size_t quantised_stand_ins_waiting();
size_t quantised_stand_ins_taken();

// Whether SwiGLU's backward hands the gate/up product its output gradient in fp8: true unless the
// environment sets TRIAX_FP8_SWIGLU_GRAD_FP8=0 or TRIAX_FP8_PRODUCER_AMAX=0 (read at each
// decision; the gradient is then written in the model's dtype and cast by the product, as before).
bool swiglu_gradient_in_fp8_enabled();

}  // namespace triax::fp8
