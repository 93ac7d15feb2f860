// Which virtual stage each model chunk of a pipeline rank holds (triax_chunk_placement, ABI
// 1.13): the host builds the chunks by it, PipelineStage sends and receives by it, schedules
// follow it. Plain C++ without LibTorch.
#pragma once

#include "triax/abi.h"

namespace triax {

// The virtual stage of `chunk` on pipeline rank `pp_rank` of `pp_size`.
inline int virtual_stage_of(triax_chunk_placement placement, int pp_size, int pp_rank, int chunk) {
  const bool returning = placement == TRIAX_CHUNKS_V && chunk % 2 == 1;
  return chunk * pp_size + (returning ? pp_size - 1 - pp_rank : pp_rank);
}

// The pipeline rank holding virtual stage `stage`, and its chunk there.
struct StageHolder {
  int pp_rank = 0;
  int chunk = 0;
};

inline StageHolder holder_of_virtual_stage(triax_chunk_placement placement, int pp_size, int stage) {
  const int chunk = stage / pp_size, position = stage % pp_size;
  const bool returning = placement == TRIAX_CHUNKS_V && chunk % 2 == 1;
  return {returning ? pp_size - 1 - position : position, chunk};
}

// The name of a placement for messages and logs.
inline const char* chunk_placement_name(triax_chunk_placement placement) {
  return placement == TRIAX_CHUNKS_V ? "V" : "interleaved";
}

}  // namespace triax
