// The records of producer-computed amaxes (recorded_amax.hpp). Forward runs on the caller's thread
// and backward on the autograd engine's: one lock guards the list. It stays short: a record lives
// only while its tensor's storage does (an activation, at most as long as the step keeps it).
#include "recorded_amax.hpp"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "tensor_identity.hpp"
#include "triax/environment_switch.hpp"
#include "triax/fp8_weight_amax.hpp"

#ifdef TRIAX_WITH_CUDA
#include "triax/kernels/kernels.hpp"
#endif

namespace triax::fp8 {
namespace {

struct Record {
  detail::TensorIdentity tensor;
  at::Tensor amax_slots;
};

std::mutex records_lock;
size_t uses = 0, misses = 0;  // under records_lock
std::vector<Record>& records() {
  static std::vector<Record> list;
  return list;
}

bool recordable(const at::Tensor& t) { return t.defined() && !t.is_inference() && t.is_contiguous(); }

constexpr int64_t kSlots = 32;
#ifdef TRIAX_WITH_CUDA
static_assert(kSlots == kernels::kAmaxSlots, "the kernels fold into this many slots");
#endif

}  // namespace

at::Tensor amax_slots_if(bool wanted, const at::Tensor& like) {
  if (!wanted || c10::InferenceMode::is_enabled() || !producer_amax_enabled()) return {};
  return at::zeros({kSlots}, like.options().dtype(at::kFloat));
}

void record_amax_if(const at::Tensor& t, const at::Tensor& slots) {
  if (slots.defined()) record_amax(t, slots);
}

void record_amax(const at::Tensor& t, const at::Tensor& amax_slots) {
  if (!recordable(t)) return;
  std::lock_guard<std::mutex> guard(records_lock);
  std::vector<Record>& list = records();
  list.erase(std::remove_if(list.begin(), list.end(),
                            [&](const Record& r) { return !r.tensor.alive() || r.tensor.same_elements(t); }),
             list.end());
  list.push_back({detail::TensorIdentity::of(t), amax_slots});
}


at::Tensor recorded_amax(const at::Tensor& t) {
  std::lock_guard<std::mutex> guard(records_lock);
  if (recordable(t))
    for (const Record& r : records())
      if (r.tensor.same_elements(t) && r.tensor.version == t._version()) {
        ++uses;
        return r.amax_slots;
      }
  ++misses;
  return {};
}

bool producer_amax_enabled() {
  return switched_on_unless_zero("TRIAX_FP8_PRODUCER_AMAX");
}

size_t recorded_amax_count() {
  std::lock_guard<std::mutex> guard(records_lock);
  return records().size();
}

size_t recorded_amax_uses() {
  std::lock_guard<std::mutex> guard(records_lock);
  return uses;
}

size_t recorded_amax_misses() {
  std::lock_guard<std::mutex> guard(records_lock);
  return misses;
}

}  // namespace triax::fp8

namespace triax {

// The optimizer's record of a weight it wrote (triax/fp8_weight_amax.hpp): one like any producer's.
void record_fp8_weight_amax(const at::Tensor& weight, const at::Tensor& amax_slots) {
  fp8::record_amax(weight, amax_slots);
}

}  // namespace triax
