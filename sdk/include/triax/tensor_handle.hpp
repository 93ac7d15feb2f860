// Moving LibTorch tensors across the C ABI as triax_tensor handles.
//
// A handle is the tensor's TensorImpl pointer. Passing a tensor *into* a call lends it
// (borrow_handle / view_handle); writing one into an out-field hands over one reference
// (release_handle / adopt_handle). Both sides are compiled against the same LibTorch, which
// the loader checks before any handle is exchanged.
#pragma once

#include <ATen/core/Tensor.h>

#include "triax/abi.h"

namespace triax {

// Lends `tensor` for the duration of a call; null for an undefined tensor.
inline triax_tensor* borrow_handle(const at::Tensor& tensor) {
  return tensor.defined() ? reinterpret_cast<triax_tensor*>(tensor.unsafeGetTensorImpl()) : nullptr;
}

// Hands one reference of `tensor` to the receiver, who must adopt it exactly once.
inline triax_tensor* release_handle(at::Tensor tensor) {
  if (!tensor.defined()) return nullptr;
  return reinterpret_cast<triax_tensor*>(tensor.unsafeReleaseTensorImpl());
}

// A tensor sharing a borrowed handle's storage and metadata (adds a reference of our own).
inline at::Tensor view_handle(triax_tensor* handle) {
  if (handle == nullptr) return {};
  auto* impl = reinterpret_cast<c10::TensorImpl*>(handle);
  return at::Tensor(c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>::reclaim_copy(impl));
}

// Takes ownership of a handle produced by release_handle.
inline at::Tensor adopt_handle(triax_tensor* handle) {
  if (handle == nullptr) return {};
  auto* impl = reinterpret_cast<c10::TensorImpl*>(handle);
  return at::Tensor(c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>::reclaim(impl));
}

}  // namespace triax
