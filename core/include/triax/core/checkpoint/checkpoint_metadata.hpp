// metadata.yaml of a checkpoint step folder: what was saved, where and by what. Written by rank 0
// as the last file of a save; its presence marks a complete step folder.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <vector>

#include "triax/config/train_config.hpp"
#include "triax/data/data_state.hpp"

namespace triax::checkpoint {

inline constexpr int64_t kFormatVersion = 1;

struct Topology {
  int64_t dp = 1, tp = 1, pp = 1;
  int64_t zero_stage = 0;
  int64_t cp = 1;  // written only when > 1: checkpoints without context parallelism keep their form
  int64_t world_size() const { return dp * tp * pp * cp; }
  bool operator==(const Topology& other) const {
    return dp == other.dp && tp == other.tp && pp == other.pp && zero_stage == other.zero_stage && cp == other.cp;
  }
  std::string describe() const;  // "dp=2 tp=2 pp=1 zero_stage=1", " cp=2" appended when > 1
};

struct CheckpointMetadata {
  int64_t format_version = kFormatVersion;
  int64_t step = 0;             // optimizer steps completed
  int64_t consumed_tokens = 0;  // over all replicas
  Topology topology;
  std::string model_plugin, model_dtype, optimizer_plugin;
  bool has_optimizer_state = false;
  std::string triax_version, torch_version, saved_at;
  LrSchedulerConfig lr_scheduler;  // the schedule that produced the saved state
  data::DataLoaderState data;
  std::vector<std::string> files;  // one HDF5 file per rank, rank order

  YAML::Node to_yaml() const;
  // Strict: a missing or malformed field is a CheckpointError naming `file` and the field.
  static CheckpointMetadata from_yaml(const YAML::Node& node, const std::string& file);
  static CheckpointMetadata read(const std::string& file);
};

}  // namespace triax::checkpoint
