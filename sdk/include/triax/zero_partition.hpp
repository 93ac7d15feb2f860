// ZeRO's partition of a parameter over the data-parallel group: the one definition that the
// core (which hands each dp rank its gradient shard) and sharding optimizers (which update that
// shard and all-gather the parameter) both use.
//
// A parameter of n elements, flattened, is cut into D chunks of c = ceil(n / D) elements; dp rank
// r owns elements [r*c, min((r+1)*c, n)). The last ranks' chunks are short or empty when D does
// not divide n; collectives pad every chunk to c elements.
#pragma once

#include <algorithm>
#include <cstdint>

namespace triax {

struct ZeroShard {
  int64_t offset = 0;  // first element of the flattened parameter owned by this rank
  int64_t length = 0;  // elements owned by this rank (< chunk on the last ranks; may be 0)
  int64_t chunk = 0;   // ceil(n / D): every rank's padded length in collectives
};

inline int64_t zero_chunk_elements(int64_t numel, int dp_size) { return (numel + dp_size - 1) / dp_size; }

inline ZeroShard zero_shard(int64_t numel, int dp_rank, int dp_size) {
  ZeroShard shard;
  shard.chunk = zero_chunk_elements(numel, dp_size);
  shard.offset = std::min<int64_t>(numel, dp_rank * shard.chunk);
  shard.length = std::min<int64_t>(numel, shard.offset + shard.chunk) - shard.offset;
  return shard;
}

}  // namespace triax
