// fp8 weights kept across the micro-batches of a step (triax/layers/fp8_weight_cache.hpp) and the
// generation of the parameters that invalidates them (triax/fp8.hpp).
#include "triax/layers/fp8_weight_cache.hpp"

#include <atomic>

#include "fp8_matmul.hpp"
#include "tensor_identity.hpp"
#include "triax/fp8.hpp"

namespace triax {
namespace {

// Bumped whenever the parameters may have changed; a kept cast of an older generation is stale.
std::atomic<uint64_t> parameter_generation{0};

}  // namespace

void fp8_weights_changed() { parameter_generation.fetch_add(1, std::memory_order_relaxed); }

// Which tensor was cast (tensor_identity.hpp), and when.
struct Fp8WeightCache::Kept {
  fp8::Fp8Matrix matrix;
  fp8::Layout layout;
  detail::TensorIdentity weight;
  uint64_t generation;

  bool same_tensor(const at::Tensor& t) const { return weight.same_place(t); }
  bool holds(fp8::Layout wanted) const { return layout == fp8::Layout::Both || layout == wanted; }
};

Fp8WeightCache::Fp8WeightCache() = default;
Fp8WeightCache::~Fp8WeightCache() = default;

fp8::Fp8Matrix Fp8WeightCache::get(const at::Tensor& weight, const fp8::Scaling& scaling, const TensorParallel& tp,
                                   fp8::Layout layout) {
  const uint64_t generation = parameter_generation.load(std::memory_order_relaxed);
  if (kept_ && kept_->generation == generation && kept_->same_tensor(weight)) {
    if (kept_->weight.version == weight._version() && kept_->holds(layout)) return kept_->matrix;
  } else if (kept_ && kept_->generation == generation) {
    never_keep_ = true;  // another storage within one step: gathered for each use
    kept_.reset();
  }
  ++casts_;
  fp8::Fp8Matrix matrix = fp8::quantise(weight, scaling, tp, layout);
  if (never_keep_) return matrix;
  kept_ = std::make_unique<Kept>(Kept{matrix, layout, detail::TensorIdentity::of(weight), generation});
  return matrix;
}

}  // namespace triax
