// The data sources a stage can name (data_stages[].data.source), each made by its factory from
// the stage's config. A new source is one file under data/src/sources/ and one entry in the table
// of source_registry.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "triax/config/train_config.hpp"
#include "triax/data/batch_layout.hpp"
#include "triax/data/data_source.hpp"

namespace triax::data {

// What a factory gets: the run's config and which stage of it to open.
struct SourceRequest {
  const TrainConfig& config;
  size_t stage;  // index into config.data_stages
  int64_t vocab_size;
  const BatchLayout& layout;
  int64_t first_sample;  // the run's number of the stage's first sample

  const DataStageConfig& stage_config() const { return config.data_stages[stage]; }
  // "data_stages.<stage>.data.<key>", for messages.
  std::string key_path(const std::string& key) const;
};

// Opens and checks the stage's data (ConfigError naming the config file, the key and what is wrong).
using SourceFactory = StageSources (*)(const SourceRequest&);

struct RegisteredSource {
  const char* name;  // data_stages[].data.source; the config reference describes each
  SourceFactory open;
};

// Every source.
const std::vector<RegisteredSource>& registered_sources();
// The sources of the stage the request names (ConfigError for an unknown source).
StageSources open_stage_sources(const SourceRequest& request);
// Refuses a stage naming an unknown source: ConfigError naming the key and the known sources.
void check_source_names(const TrainConfig& config);

}  // namespace triax::data
