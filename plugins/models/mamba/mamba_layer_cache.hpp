// What one sequence keeps of one Mamba-1 layer between cached forwards: the last d_conv - 1
// inputs of the convolution and the scan's state, for this rank's channels.
//
// Each sequence has its own MambaLayerCache, but the rows of one forward share one store (as the
// attention layers' KeyValueCache does): [rows, d/tp, d_conv - 1] conv inputs in the activations'
// dtype and [rows, d/tp, d_state] fp32 states, read and written in place, so that a decoding step
// touches the same addresses every time (what a CUDA graph of the step records). The first forward
// that sees a set of rows together, in this order, gives them a store with each row's states
// copied in once (zeros for a sequence's first forward); the next forwards over the same rows use
// it where it is.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "triax/inference_cache.hpp"

namespace triax::mamba {

struct MambaStates {
  at::Tensor conv;  // [rows, d/tp, d_conv - 1], the activations' dtype
  at::Tensor ssm;   // [rows, d/tp, d_state] fp32
};

struct MambaLayerCache : LayerCache {
  std::shared_ptr<MambaStates> store;  // null before the sequence's first forward
  int64_t slot = 0;                    // this sequence's row of the store
};

// The store `rows` share, made (and filled with their states) when they do not share one yet in
// this order, with `channels` channels, `taps` - 1 conv inputs, `state_size` states, the dtype of
// `options` for the conv inputs, on its device.
MambaStates& shared_states(const std::vector<MambaLayerCache*>& rows, int64_t channels, int64_t taps,
                           int64_t state_size, const at::TensorOptions& options);

}  // namespace triax::mamba
