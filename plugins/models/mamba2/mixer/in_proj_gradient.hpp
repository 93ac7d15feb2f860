// The gradient of in_proj's output written in place by the consumers of its parts. The mixer
// splits in_proj's output into z (the gate), xBC (the convolution's input) and dt; LibTorch's
// split backward joins their three gradients with a cat (a read and a write of the whole
// [b, l, 2 d + 2 G N + H] gradient per layer). Here the split is an autograd function sharing an
// InProjGradient with the consumers: a consumer whose backward kernel can write its input's
// gradient with its input's strides asks for its slot (slot_for) and writes there; the split's
// backward then returns the one buffer, copying in only the parts that did not land (dt's, from
// LibTorch ops; any part whose consumer took no slot). The bits are the same either way: a
// landed part holds what the consumer would have returned.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <vector>

namespace triax::mamba2 {

class InProjGradient : public torch::CustomClassHolder {
 public:
  // `output`: in_proj's output as split, contiguous (the buffer takes its layout).
  explicit InProjGradient(const at::Tensor& output);

  // Where the gradient of `input` lands: the buffer's view at input's place in the output, with
  // input's sizes and strides. Undefined where `input` is not a view of the output (a copy, or a
  // saved tensor unpacked elsewhere) or its place was given before (a second consumer must not
  // overwrite the first's gradient). The buffer is allocated at the first slot given.
  at::Tensor slot_for(const at::Tensor& input);

  // The whole gradient of the output: `grads` (one per part, the parts `sizes` wide along the
  // last dim, in order; undefined: zeros) in one tensor of the output's shape and layout. A part
  // whose gradient is its slot is not copied; where no slot was given, one cat (LibTorch's split
  // backward). Releases the buffer (the caller owns the result) and the slots given.
  at::Tensor joined(const std::vector<int64_t>& sizes, const std::vector<at::Tensor>& grads);

 private:
  at::Tensor take_buffer();

  std::vector<int64_t> sizes_;
  at::TensorOptions options_;
  c10::weak_intrusive_ptr<c10::StorageImpl> storage_;  // the output's (a weak one: no memory kept)
  int64_t offset_ = 0;                                 // the output's storage offset
  std::vector<int64_t> given_;                         // the storage offsets of the slots given
  at::Tensor buffer_;
};

// The rank's in_proj output [b, s, groups, width] split along its last dim into parts of
// `sizes`: views, as split_with_sizes. With `gradient` (see above) the backward lands the parts'
// gradients in its buffer; without it, LibTorch's split (its backward: one cat).
std::vector<at::Tensor> split_in_proj_output(const at::Tensor& output, const std::vector<int64_t>& sizes,
                                             const c10::intrusive_ptr<InProjGradient>& gradient);

// The InProjGradient for `output` where its parts' gradients can land (the switch on, autograd
// recording, output contiguous and requiring its gradient); else null (the split of LibTorch).
c10::intrusive_ptr<InProjGradient> in_proj_gradient_for(const at::Tensor& output);

// TRIAX_MAMBA2_LANDED_IN_PROJ_GRADIENT: "0" off (LibTorch's split and its cat), on otherwise
// (unset included); read at every call, so that one process can time both.
bool landed_in_proj_gradient_switched_on();

// An InProjGradient carried through an autograd function's saved data (a capsule) and back.
at::IValue as_saved(const c10::intrusive_ptr<InProjGradient>& gradient);
c10::intrusive_ptr<InProjGradient> from_saved(const at::IValue& saved);

}  // namespace triax::mamba2
