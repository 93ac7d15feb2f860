// Pipeline blocks: the units a model is cut into (embedding, each layer, head) and their
// assignment to pipeline ranks. The host balances contiguous runs of blocks by their compute
// cost, or takes an explicit split from the config.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "triax/abi.h"

namespace triax {

struct PipelineBlock {
  int index = 0;      // position in the model, 0 = first
  double cost = 0.0;  // forward FLOPs per token, as the model reports it
  int pp_rank = 0;    // the pipeline rank that holds it
};

// Blocks [first, last) held by one pipeline rank.
struct StageBlocks {
  int first = 0;
  int last = 0;
  int count() const { return last - first; }
};

// Contiguous runs of blocks, one per pipeline rank, minimising the largest run's cost (every
// rank gets at least one block). `blocks_per_stage`, when given, fixes the run lengths instead.
// Throws triax::ConfigError when the request cannot be met (more ranks than blocks, counts
// that do not add up to the block count).
std::vector<StageBlocks> partition_pipeline_blocks(const std::vector<double>& costs, int pp_size,
                                                   const std::optional<std::vector<int>>& blocks_per_stage = {});

// For engines that hold several model chunks per pipeline rank (triax_engine_vtable.model_chunks):
// the blocks cut into pp_size x chunk_count contiguous runs, the virtual stages, in order; which
// chunk of which rank holds each is the engine's chunk placement (triax/chunk_placement.hpp).
// Balanced like partition_pipeline_blocks, or `blocks_per_stage` (pp_size x chunk_count counts,
// in virtual stage order). With one chunk it is partition_pipeline_blocks. Throws
// triax::ConfigError naming the key when it cannot be met: parallelism.pp_chunks_per_rank, or,
// when the engine `chunks_engine` decides the count itself, parallelism.pp_engine.
std::vector<StageBlocks> partition_virtual_stages(const std::vector<double>& costs, int pp_size, int chunk_count,
                                                  const std::optional<std::vector<int>>& blocks_per_stage = {},
                                                  const std::string& chunks_engine = "");

// The blocks with their ranks.
std::vector<PipelineBlock> assign_pipeline_blocks(const std::vector<double>& costs,
                                                  const std::vector<StageBlocks>& stages);

// "rank 0: blocks [0, 3) 48% of the compute, rank 1: ...", for the start-up log.
std::string describe_pipeline(const std::vector<double>& costs, const std::vector<StageBlocks>& stages);
// "rank 0: chunk 0 blocks [0, 2), chunk 1 blocks [4, 5) 52% of the compute; rank 1: ...", for
// virtual stages (describe_pipeline when there is one chunk per rank).
std::string describe_virtual_stages(const std::vector<double>& costs, const std::vector<StageBlocks>& stages,
                                    int pp_size, triax_chunk_placement placement = TRIAX_CHUNKS_INTERLEAVED);

}  // namespace triax
