// Pipeline blocks: the units a model is cut into (embedding, each layer, head) and their
// assignment to pipeline ranks. The host balances contiguous runs of blocks by their compute
// cost, or takes an explicit split from the config.
#pragma once

#include <optional>
#include <string>
#include <vector>

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

// The blocks with their ranks.
std::vector<PipelineBlock> assign_pipeline_blocks(const std::vector<double>& costs,
                                                  const std::vector<StageBlocks>& stages);

// "rank 0: blocks [0, 3) 48% of the compute, rank 1: ...", for the start-up log.
std::string describe_pipeline(const std::vector<double>& costs, const std::vector<StageBlocks>& stages);

}  // namespace triax
