#include "mamba_layer_cache.hpp"

#include <ATen/ATen.h>

namespace triax::mamba {
namespace {

bool share_one_store(const std::vector<MambaLayerCache*>& rows, int64_t channels, int64_t taps,
                     const at::TensorOptions& options) {
  const std::shared_ptr<MambaStates>& first = rows.front()->store;
  if (!first || first->conv.size(0) != static_cast<int64_t>(rows.size()) || first->conv.size(1) != channels ||
      first->conv.size(2) != taps - 1 || first->conv.scalar_type() != at::typeMetaToScalarType(options.dtype()) ||
      first->conv.device() != options.device())
    return false;
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i]->store != first || rows[i]->slot != static_cast<int64_t>(i)) return false;
  return true;
}

}  // namespace

MambaStates& shared_states(const std::vector<MambaLayerCache*>& rows, int64_t channels, int64_t taps,
                           int64_t state_size, const at::TensorOptions& options) {
  if (share_one_store(rows, channels, taps, options)) return *rows.front()->store;
  const auto count = static_cast<int64_t>(rows.size());
  auto store = std::make_shared<MambaStates>();
  store->conv = at::zeros({count, channels, taps - 1}, options);
  store->ssm = at::zeros({count, channels, state_size}, options.dtype(at::kFloat));
  for (int64_t i = 0; i < count; ++i) {
    MambaLayerCache& row = *rows[static_cast<size_t>(i)];
    if (row.store) {
      store->conv[i].copy_(row.store->conv[row.slot]);
      store->ssm[i].copy_(row.store->ssm[row.slot]);
    }
    row.store = store;
    row.slot = i;
  }
  return *store;
}

}  // namespace triax::mamba
