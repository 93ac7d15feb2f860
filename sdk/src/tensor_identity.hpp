// Which tensor a value was computed from, without keeping the tensor alive: its storage (held
// weakly, so no other storage can take its address while the reference lives), the place in it
// and the version counter at the time (an in-place write bumps it).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/StorageImpl.h>

#include <vector>

namespace triax::detail {

struct TensorIdentity {
  c10::weak_intrusive_ptr<c10::StorageImpl> storage;
  int64_t offset = 0;
  std::vector<int64_t> sizes, strides;
  int64_t version = 0;
  int64_t numel = 0;
  bool contiguous = false;

  static TensorIdentity of(const at::Tensor& t) {
    return {t.storage().getWeakStorageImpl(), t.storage_offset(), t.sizes().vec(), t.strides().vec(),
            t._version(),                     t.numel(),          t.is_contiguous()};
  }
  // The same elements of the same live storage, laid out alike (the version aside).
  bool same_place(const at::Tensor& t) const {
    return !storage.expired() && storage._unsafe_get_target() == t.storage().unsafeGetStorageImpl() &&
           offset == t.storage_offset() && t.sizes().equals(sizes) && t.strides().equals(strides);
  }
  // The same elements of the same live storage, both contiguous, whatever their shape (a reshape).
  bool same_elements(const at::Tensor& t) const {
    return contiguous && t.is_contiguous() && !storage.expired() &&
           storage._unsafe_get_target() == t.storage().unsafeGetStorageImpl() && offset == t.storage_offset() &&
           numel == t.numel();
  }
  bool alive() const { return !storage.expired(); }
};

}  // namespace triax::detail
