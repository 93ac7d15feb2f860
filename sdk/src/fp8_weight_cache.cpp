// fp8 weights kept across the micro-batches of a step (triax/layers/fp8_weight_cache.hpp) and the
// generation of the parameters that invalidates them (triax/fp8.hpp).
#include "triax/layers/fp8_weight_cache.hpp"

#include <c10/core/StorageImpl.h>

#include <atomic>
#include <vector>

#include "fp8_matmul.hpp"
#include "triax/fp8.hpp"

namespace triax {
namespace {

// Bumped whenever the parameters may have changed; a kept cast of an older generation is stale.
std::atomic<uint64_t> parameter_generation{0};

}  // namespace

void fp8_weights_changed() { parameter_generation.fetch_add(1, std::memory_order_relaxed); }

// Which tensor was cast, and when. The storage is held weakly: it is identified without being
// kept alive, and no other storage can take its address while the weak reference lives.
struct Fp8WeightCache::Kept {
  fp8::Fp8Matrix matrix;
  fp8::Layout layout;
  c10::weak_intrusive_ptr<c10::StorageImpl> storage;
  int64_t offset;
  std::vector<int64_t> sizes, strides;
  int64_t version;
  uint64_t generation;

  bool same_tensor(const at::Tensor& weight) const {
    return !storage.expired() && storage._unsafe_get_target() == weight.storage().unsafeGetStorageImpl() &&
           offset == weight.storage_offset() && weight.sizes().equals(sizes) && weight.strides().equals(strides);
  }
  bool holds(fp8::Layout wanted) const { return layout == fp8::Layout::Both || layout == wanted; }
};

Fp8WeightCache::Fp8WeightCache() = default;
Fp8WeightCache::~Fp8WeightCache() = default;

fp8::Fp8Matrix Fp8WeightCache::get(const at::Tensor& weight, const fp8::Scaling& scaling, const TensorParallel& tp,
                                   fp8::Layout layout) {
  const uint64_t generation = parameter_generation.load(std::memory_order_relaxed);
  if (kept_ && kept_->generation == generation && kept_->same_tensor(weight)) {
    if (kept_->version == weight._version() && kept_->holds(layout)) return kept_->matrix;
  } else if (kept_ && kept_->generation == generation) {
    never_keep_ = true;  // another storage within one step: gathered for each use
    kept_.reset();
  }
  ++casts_;
  fp8::Fp8Matrix matrix = fp8::quantise(weight, scaling, tp, layout);
  if (never_keep_) return matrix;
  kept_ = std::make_unique<Kept>(Kept{matrix, layout, weight.storage().getWeakStorageImpl(), weight.storage_offset(),
                                      weight.sizes().vec(), weight.strides().vec(), weight._version(), generation});
  return matrix;
}

}  // namespace triax
