// A linear's weight cast to fp8 (both layouts and its tensorwise scale), kept across the
// micro-batches of an optimizer step (docs/fp8.md): the weight changes only when the optimizer
// steps or a checkpoint is loaded, so every micro-batch's forward and backward can share one cast
// (and one amax) instead of casting the weight again each time.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>

#include "triax/layers/tensor_parallel.hpp"

namespace triax {

namespace fp8 {
struct Fp8Matrix;
struct Scaling;
enum class Layout;
}  // namespace fp8

class Fp8WeightCache {
 public:
  Fp8WeightCache();
  ~Fp8WeightCache();

  // The fp8 weight in `layout` (or in both): the copy kept when `weight` is the tensor cast last
  // (the same storage, offset, shape, strides and version) and no parameter has changed since
  // (fp8_weights_changed, triax/fp8.hpp); else `weight` cast now, and kept. A weight whose storage
  // changes within one step (ZeRO-3 gathers it for every use) is never kept: it would not be hit
  // and would hold memory that ZeRO-3 frees.
  fp8::Fp8Matrix get(const at::Tensor& weight, const fp8::Scaling& scaling, const TensorParallel& tp,
                     fp8::Layout layout);

  // How many times the weight was cast (the tests count them).
  int64_t casts() const { return casts_; }

 private:
  struct Kept;
  std::unique_ptr<Kept> kept_;
  bool never_keep_ = false;
  int64_t casts_ = 0;
};

}  // namespace triax
