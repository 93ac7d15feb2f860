// Saving one checkpoint step, collectively over every rank of the world.
//
// Each rank writes one HDF5 file with the pieces only it holds (see docs/checkpoint-format.md for
// which rank stores what): parameter shards with their place in the whole, optimizer state
// shards, and its RNG states. Rank 0 adds metadata.yaml and config.yaml. The step becomes visible
// only when every file is complete and durable: files are written into a .partial folder, the
// ranks agree that all succeeded, rank 0 renames the folder and then moves `latest`. A failure
// on any rank fails the save on every rank and leaves the previous checkpoint as latest.
//
// The save passes named points (save_start, before_rank_file, mid_rank_file, before_rank_commit,
// after_rank_file, after_agreement, before_rename, after_rename, after_latest) where tests kill a
// rank with TRIAX_FAULT and where a second preemption signal aborts it; docs/reliability.md says
// what each one leaves on disk. Removing old steps (keep_last) is not the writer's: it follows the
// commit on another thread (BackgroundPrune, with the points mid_prune and after_prune).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "triax/core/checkpoint/checkpoint_metadata.hpp"
#include "triax/parameter.hpp"

namespace triax {
class Communicator;
}

namespace triax::checkpoint {

// One tensor of optimizer state as the store sees it (host-side copy of triax_optimizer_state).
struct StateTensorToSave {
  const NamedParameter* parameter = nullptr;
  std::string name;  // "exp_avg", ...
  at::Tensor tensor;
  int64_t element_offset = 0;
  bool per_parameter = false;
};

// A ZeRO-3 parameter's place: a range of the elements of a box (its tensor-parallel shard) that
// the parameter's tensor does not have the shape of.
struct ElementRange {
  std::vector<int64_t> box_shape;
  int64_t element_begin = 0;
};

struct RankContents {
  std::vector<const NamedParameter*> parameters;  // the shards this rank stores
  std::vector<StateTensorToSave> optimizer_state;  // likewise (element offsets within the box)
  std::map<std::string, at::Tensor> rng_states;    // "cpu", "cuda": generator states (uint8)
  std::map<std::string, ElementRange> element_ranges;  // by parameter name: its ZeRO-3 shards' places
};

struct SaveResult {
  std::filesystem::path folder;
  int64_t bytes_written = 0;  // this rank's file
  double seconds = 0.0;       // whole save, agreement included
};

// How writing this rank's own file went: no collective is involved, so a background thread may
// do it while the ranks train on.
struct RankFileWrite {
  int64_t bytes = 0;
  std::string failure;  // empty when the file is durable; else the error, naming the file
  double seconds = 0.0;
};

class CheckpointWriter {
 public:
  // `root`: the checkpoints folder.
  CheckpointWriter(std::filesystem::path root, Communicator& communicator);

  // Collective over the world. `metadata` and `resolved_config` are used on rank 0.
  SaveResult save(const CheckpointMetadata& metadata, const RankContents& contents,
                  const std::string& resolved_config);

  // save() in its three phases, for a save whose rank files are written in the background.
  // Collective: the step's empty .partial folder, which begin returns.
  std::filesystem::path begin(int64_t step);
  // This rank's file only; never throws (the failure is in the result).
  RankFileWrite write_own_file(const std::filesystem::path& partial, const RankContents& contents,
                               int64_t step) const;
  // Rank 0 (nothing elsewhere): config.yaml and metadata.yaml into the .partial folder (a background save writes
  // them with its rank file, so that the commit at the step boundary is short).
  void write_folder_files(const CheckpointMetadata& metadata, const std::filesystem::path& partial,
                          const std::string& resolved_config) const;
  // Collective: the ranks agree every file is durable, then rank 0 commits the folder and moves
  // `latest`. Throws CheckpointError on every rank when any rank's write failed, with its message.
  // `resolved_config`: rank 0 writes the folder's files first; nullopt when it has written them.
  void conclude(const CheckpointMetadata& metadata, const std::filesystem::path& partial,
                const RankFileWrite& written, const std::optional<std::string>& resolved_config);

 private:
  // The save's phases; each ends with every rank's agreement, and a failure throws on every rank.
  void prepare_partial_folder(const std::filesystem::path& partial, int64_t step);
  void agree_files_written(const RankFileWrite& written, int64_t step);
  void complete_folder(const CheckpointMetadata& metadata, const std::filesystem::path& partial,
                       const std::optional<std::string>& resolved_config);
  // Rank 0's part of complete_folder.
  void publish(const CheckpointMetadata& metadata, const std::filesystem::path& partial,
               const std::optional<std::string>& resolved_config) const;
  void move_into_place(const std::filesystem::path& partial, int64_t step) const;

  int64_t write_rank_file(const std::filesystem::path& file, const RankContents& contents, int64_t step) const;
  // True on every rank when `ok` is true on every rank.
  bool all_ranks_agree(bool ok);

  std::filesystem::path root_;
  Communicator& communicator_;
};

// The dataset paths of a parameter and of one of its optimizer states inside a rank file.
std::string parameter_dataset(const std::string& parameter_name);
std::string optimizer_dataset(const std::string& parameter_name, const std::string& state_name);

}  // namespace triax::checkpoint
