#include "step/pipeline_blocks.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "triax/chunk_placement.hpp"
#include "triax/error.hpp"

namespace triax {
namespace {

// Linear partition by dynamic programming: best[k][i] = the smallest possible largest stage cost
// when the first i blocks form k stages. n and pp are small (blocks <= a few hundred).
std::vector<StageBlocks> balanced_partition(const std::vector<double>& costs, int pp_size) {
  const int n = static_cast<int>(costs.size());
  std::vector<double> prefix(static_cast<size_t>(n) + 1, 0.0);
  for (int i = 0; i < n; ++i)
    prefix[static_cast<size_t>(i) + 1] = prefix[static_cast<size_t>(i)] + costs[static_cast<size_t>(i)];
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(static_cast<size_t>(pp_size) + 1,
                                        std::vector<double>(static_cast<size_t>(n) + 1, inf));
  std::vector<std::vector<int>> cut(static_cast<size_t>(pp_size) + 1, std::vector<int>(static_cast<size_t>(n) + 1, 0));
  best[0][0] = 0.0;
  for (int k = 1; k <= pp_size; ++k)
    for (int i = k; i <= n; ++i)
      for (int j = k - 1; j < i; ++j) {  // the last stage holds blocks [j, i)
        const double largest = std::max(best[static_cast<size_t>(k) - 1][static_cast<size_t>(j)],
                                        prefix[static_cast<size_t>(i)] - prefix[static_cast<size_t>(j)]);
        // Ties go to the later cut, which moves blocks towards later stages (the last stage
        // also computes the loss).
        if (largest <= best[static_cast<size_t>(k)][static_cast<size_t>(i)]) {
          best[static_cast<size_t>(k)][static_cast<size_t>(i)] = largest;
          cut[static_cast<size_t>(k)][static_cast<size_t>(i)] = j;
        }
      }
  std::vector<StageBlocks> stages(static_cast<size_t>(pp_size));
  int end = n;
  for (int k = pp_size; k >= 1; --k) {
    const int start = cut[static_cast<size_t>(k)][static_cast<size_t>(end)];
    stages[static_cast<size_t>(k) - 1] = {start, end};
    end = start;
  }
  return stages;
}

}  // namespace

std::vector<StageBlocks> partition_pipeline_blocks(const std::vector<double>& costs, int pp_size,
                                                   const std::optional<std::vector<int>>& blocks_per_stage) {
  return partition_virtual_stages(costs, pp_size, 1, blocks_per_stage);
}

std::vector<StageBlocks> partition_virtual_stages(const std::vector<double>& costs, int pp_size, int chunk_count,
                                                  const std::optional<std::vector<int>>& blocks_per_stage,
                                                  const std::string& chunks_engine) {
  const int n = static_cast<int>(costs.size());
  if (pp_size < 1) throw ConfigError("parallelism.pp: must be >= 1, got " + std::to_string(pp_size));
  if (chunk_count < 1)
    throw ConfigError("parallelism.pp_chunks_per_rank: the engine asks for " + std::to_string(chunk_count) +
                      " model chunks per pipeline rank; at least 1 is needed");
  const int stages_wanted = pp_size * chunk_count;
  const std::string unit = chunk_count == 1 ? "pipeline rank" : "virtual stage";
  if (stages_wanted > n) {
    if (chunk_count == 1)
      throw ConfigError("parallelism.pp (" + std::to_string(pp_size) + ") is larger than the model's " +
                        std::to_string(n) + " pipeline blocks: every pipeline rank needs at least one block");
    const std::string chunks = std::to_string(chunk_count) +
                               " model chunks on each of parallelism.pp = " + std::to_string(pp_size) +
                               " pipeline ranks make " + std::to_string(stages_wanted) +
                               " virtual stages, but the model has " + std::to_string(n) +
                               " pipeline blocks (embedding, each layer and the head): every virtual stage needs at "
                               "least one block; ";
    if (!chunks_engine.empty())
      throw ConfigError("parallelism.pp_engine: " + chunks_engine + " places " + chunks +
                        "lower parallelism.pp, give the model more layers or choose another parallelism.pp_engine");
    throw ConfigError("parallelism.pp_chunks_per_rank: " + chunks +
                      "lower parallelism.pp_chunks_per_rank or parallelism.pp");
  }
  if (!blocks_per_stage) return balanced_partition(costs, stages_wanted);

  const std::vector<int>& counts = *blocks_per_stage;
  if (static_cast<int>(counts.size()) != stages_wanted)
    throw ConfigError("parallelism.pp_blocks_per_stage: expected " + std::to_string(stages_wanted) +
                      " counts (one per " + unit +
                      (chunk_count == 1 ? "" : ": pp x pp_chunks_per_rank, in virtual stage order") + "), got " +
                      std::to_string(counts.size()));
  std::vector<StageBlocks> stages;
  int first = 0;
  for (size_t k = 0; k < counts.size(); ++k) {
    if (counts[k] < 1)
      throw ConfigError("parallelism.pp_blocks_per_stage." + std::to_string(k) + ": every " + unit +
                        " needs at least one block, got " + std::to_string(counts[k]));
    stages.push_back({first, first + counts[k]});
    first += counts[k];
  }
  if (first != n)
    throw ConfigError("parallelism.pp_blocks_per_stage: the counts add up to " + std::to_string(first) +
                      " blocks, but the model has " + std::to_string(n) +
                      " (embedding, each layer and the head are one block each)");
  return stages;
}

std::vector<PipelineBlock> assign_pipeline_blocks(const std::vector<double>& costs,
                                                  const std::vector<StageBlocks>& stages) {
  std::vector<PipelineBlock> blocks;
  for (size_t rank = 0; rank < stages.size(); ++rank)
    for (int b = stages[rank].first; b < stages[rank].last; ++b)
      blocks.push_back({b, costs[static_cast<size_t>(b)], static_cast<int>(rank)});
  return blocks;
}

std::string describe_pipeline(const std::vector<double>& costs, const std::vector<StageBlocks>& stages) {
  std::vector<double> stage_cost(stages.size(), 0.0);
  for (const PipelineBlock& block : assign_pipeline_blocks(costs, stages))
    stage_cost[static_cast<size_t>(block.pp_rank)] += block.cost;
  const double total = std::accumulate(stage_cost.begin(), stage_cost.end(), 0.0);
  std::string text;
  for (size_t rank = 0; rank < stages.size(); ++rank) {
    const int share = total > 0 ? static_cast<int>(std::lround(100.0 * stage_cost[rank] / total)) : 0;
    text += (rank ? ", " : "") + std::string("rank ") + std::to_string(rank) + ": blocks [" +
            std::to_string(stages[rank].first) + ", " + std::to_string(stages[rank].last) + ") " +
            std::to_string(share) + "% of the compute";
  }
  return text;
}

std::string describe_virtual_stages(const std::vector<double>& costs, const std::vector<StageBlocks>& stages,
                                    int pp_size, triax_chunk_placement placement) {
  const int chunk_count = pp_size > 0 ? static_cast<int>(stages.size()) / pp_size : 0;
  if (chunk_count <= 1) return describe_pipeline(costs, stages);
  const double total = std::accumulate(costs.begin(), costs.end(), 0.0);
  std::string text;
  for (int rank = 0; rank < pp_size; ++rank) {
    double cost = 0.0;
    text += (rank ? "; " : "") + std::string("rank ") + std::to_string(rank) + ":";
    for (int chunk = 0; chunk < chunk_count; ++chunk) {
      const StageBlocks& stage = stages[static_cast<size_t>(virtual_stage_of(placement, pp_size, rank, chunk))];
      for (int b = stage.first; b < stage.last; ++b) cost += costs[static_cast<size_t>(b)];
      text += (chunk ? ", " : " ") + std::string("chunk ") + std::to_string(chunk) + " blocks [" +
              std::to_string(stage.first) + ", " + std::to_string(stage.last) + ")";
    }
    const int share = total > 0 ? static_cast<int>(std::lround(100.0 * cost / total)) : 0;
    text += " " + std::to_string(share) + "% of the compute";
  }
  return text;
}

}  // namespace triax
