// The records of stand-ins (quantised_stand_in.hpp). A stand-in is made in one backward node and
// taken in the next (autograd's thread); one lock guards the list all the same, as recorded_amax's.
#include "quantised_stand_in.hpp"

#include <ATen/ATen.h>
#include <c10/core/StorageImpl.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <vector>

#include "recorded_amax.hpp"
#include "triax/environment_switch.hpp"

namespace triax::fp8 {
namespace {

struct StandInRecord {
  c10::weak_intrusive_ptr<c10::StorageImpl> storage;  // the stand-in's one element
  int64_t numel;
  DirectQuantiser quantiser;
};

std::mutex stand_ins_lock;
size_t stand_ins_taken = 0;  // under stand_ins_lock
std::vector<StandInRecord>& stand_in_records() {
  static std::vector<StandInRecord> list;
  return list;
}

// The live record of t's storage for all of its elements (a stand-in or a reshape of one), or end.
std::vector<StandInRecord>::iterator find_stand_in(const at::Tensor& t) {
  std::vector<StandInRecord>& list = stand_in_records();
  if (!t.defined() || !t.has_storage()) return list.end();
  const c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  return std::find_if(list.begin(), list.end(), [&](const StandInRecord& r) {
    return !r.storage.expired() && r.storage._unsafe_get_target() == storage && r.numel == t.numel();
  });
}

}  // namespace

at::Tensor quantised_stand_in(at::IntArrayRef sizes, const at::TensorOptions& options, DirectQuantiser quantiser) {
  // An element of its own per stand-in: the storage names the record.
  const at::Tensor stand_in = at::full({1}, std::numeric_limits<double>::quiet_NaN(), options).expand(sizes);
  std::lock_guard<std::mutex> guard(stand_ins_lock);
  std::vector<StandInRecord>& list = stand_in_records();
  list.erase(std::remove_if(list.begin(), list.end(), [](const StandInRecord& r) { return r.storage.expired(); }),
             list.end());
  list.push_back({stand_in.storage().getWeakStorageImpl(), stand_in.numel(), std::move(quantiser)});
  return stand_in;
}

bool is_quantised_stand_in(const at::Tensor& t) {
  std::lock_guard<std::mutex> guard(stand_ins_lock);
  return find_stand_in(t) != stand_in_records().end();
}

DirectQuantiser take_direct_quantiser(const at::Tensor& t) {
  DirectQuantiser quantiser;
  {
    std::lock_guard<std::mutex> guard(stand_ins_lock);
    const auto record = find_stand_in(t);
    if (record == stand_in_records().end()) return {};
    quantiser = std::move(record->quantiser);
    stand_in_records().erase(record);
    ++stand_ins_taken;
  }
  return quantiser;
}

size_t quantised_stand_ins_waiting() {
  std::lock_guard<std::mutex> guard(stand_ins_lock);
  return static_cast<size_t>(std::count_if(stand_in_records().begin(), stand_in_records().end(),
                                           [](const StandInRecord& r) { return !r.storage.expired(); }));
}

size_t quantised_stand_ins_taken() {
  std::lock_guard<std::mutex> guard(stand_ins_lock);
  return stand_ins_taken;
}

bool swiglu_gradient_in_fp8_enabled() {
  return switched_on_unless_zero("TRIAX_FP8_SWIGLU_GRAD_FP8") && producer_amax_enabled();
}

}  // namespace triax::fp8
