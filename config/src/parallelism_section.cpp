// parallelism: the mesh (dp, pp, tp, context and expert parallelism), the pipeline engine, tensor-parallel
// mode, the communication backend. The whole section is handed to the engine plugin as read.
#include <algorithm>
#include <cctype>

#include "config_sections.hpp"

namespace triax::config {
namespace {

// Far above any launch; keeps the mesh's rank arithmetic (int) from overflowing.
constexpr int64_t kMaxRanks = int64_t{1} << 24;
constexpr int64_t kMaxChunksPerRank = 1024;
constexpr double kMaxTimeoutSeconds = 1.0e7;  // about four months

std::string uppercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

ParallelismConfig read_parallelism(ConfigReader& root) {
  ConfigReader r = section_or_empty(root, "parallelism");
  ParallelismConfig p;
  p.dp = int_or(r, "dp", p.dp, 1, kMaxRanks);
  p.pp = int_or(r, "pp", p.pp, 1, kMaxRanks);
  p.tp = int_or(r, "tp", p.tp, 1, kMaxRanks);
  p.expert_parallel_size = int_or(r, "expert_parallel_size", p.expert_parallel_size, 1, kMaxRanks);
  p.context_parallel_size = int_or(r, "context_parallel_size", p.context_parallel_size, 1, kMaxRanks);
  if (p.dp * p.pp * p.tp * p.context_parallel_size > kMaxRanks)
    r.fail("dp", "dp x pp x tp x context_parallel_size = " +
                     std::to_string(p.dp * p.pp * p.tp * p.context_parallel_size) + " processes, more than " +
                     std::to_string(kMaxRanks) + " (dp " + std::to_string(p.dp) + ", pp " + std::to_string(p.pp) +
                     ", tp " + std::to_string(p.tp) + ", cp " + std::to_string(p.context_parallel_size) + ")");
  p.context_parallel_attention =
      r.choice("context_parallel_attention", {"all_gather", "ring"}, p.context_parallel_attention);
  p.pp_engine = nonempty_string_or(r, "pp_engine", p.pp_engine);

  // nanotron reads tp_mode case-insensitively (TensorParallelLinearMode[x.upper()]).
  std::optional<std::string> mode = r.optional<std::string>("tp_mode");
  p.tp_mode = mode ? uppercase(*mode) : p.tp_mode;
  if (p.tp_mode != "ALL_REDUCE" && p.tp_mode != "REDUCE_SCATTER")
    r.fail("tp_mode", "expected one of: ALL_REDUCE, REDUCE_SCATTER; got '" + *mode + "'");
  r.resolved()["tp_mode"] = p.tp_mode;

  p.tp_linear_async_communication = r.get<bool>("tp_linear_async_communication", p.tp_linear_async_communication);
  p.recompute_layer = r.get<bool>("recompute_layer", p.recompute_layer);
  p.recompute_mlp_activation = r.get<bool>("recompute_mlp_activation", p.recompute_mlp_activation);
  p.moe_layer_recompute = r.get<bool>("moe_layer_recompute", p.moe_layer_recompute);
  p.tp_recompute_allgather = r.get<bool>("tp_recompute_allgather", p.tp_recompute_allgather);
  p.comm_backend = r.choice("comm_backend", {"auto", "mpi", "nccl"}, p.comm_backend);
  p.comm_timeout_seconds = r.get<double>("comm_timeout_seconds", p.comm_timeout_seconds);
  if (!(p.comm_timeout_seconds > 0) || p.comm_timeout_seconds > kMaxTimeoutSeconds)
    r.fail("comm_timeout_seconds", "must be > 0 and at most " + number(kMaxTimeoutSeconds) + " (seconds), got " +
                                       number(p.comm_timeout_seconds));
  p.pp_chunks_per_rank = int_or(r, "pp_chunks_per_rank", p.pp_chunks_per_rank, 1, kMaxChunksPerRank);
  p.pp_blocks_per_stage = r.optional<std::vector<int64_t>>("pp_blocks_per_stage");
  p.pp_pass_times = r.optional<std::vector<double>>("pp_pass_times");
  if (p.pp_pass_times && (p.pp_pass_times->size() != 3 ||
                          !std::all_of(p.pp_pass_times->begin(), p.pp_pass_times->end(), [](double t) { return t > 0; })))
    r.fail("pp_pass_times", "expected three times above 0: [forward, input backward, weight backward] of one stage");
  p.pp_pass_record = r.get<bool>("pp_pass_record", p.pp_pass_record);
  p.recompute_num_layers = optional_int(r, "recompute_num_layers", 1, INT32_MAX);
  if (p.recompute_num_layers && !p.recompute_layer)
    r.fail("recompute_num_layers", "needs parallelism.recompute_layer: true (it limits which layers are recomputed)");
  r.finish();

  const int64_t virtual_stages = p.pp * p.pp_chunks_per_rank;
  if (p.pp_blocks_per_stage && static_cast<int64_t>(p.pp_blocks_per_stage->size()) != virtual_stages)
    r.fail("pp_blocks_per_stage",
           "expected " + std::to_string(virtual_stages) + " block counts (one per " +
               (p.pp_chunks_per_rank == 1 ? std::string("pipeline rank") : "virtual stage: pp x pp_chunks_per_rank") +
               "), got " + std::to_string(p.pp_blocks_per_stage->size()));
  p.section = YAML::Clone(r.resolved());
  return p;
}

}  // namespace triax::config
