#include "triax/data/source_registry.hpp"

#include "triax/error.hpp"

namespace triax::data {

// The factories, one file each under sources/.
StageSources open_synthetic_source(const SourceRequest& request);
StageSources open_token_folder_source(const SourceRequest& request);

const std::vector<RegisteredSource>& registered_sources() {
  static const std::vector<RegisteredSource> sources = {
      {kSyntheticSource, open_synthetic_source},
      {kTokenFoldersSource, open_token_folder_source},
  };
  return sources;
}

std::string SourceRequest::key_path(const std::string& key) const {
  return "data_stages." + std::to_string(stage) + ".data." + key;
}

namespace {

const RegisteredSource* find_source(const std::string& name) {
  for (const RegisteredSource& source : registered_sources())
    if (name == source.name) return &source;
  return nullptr;
}

void check_source_name(const TrainConfig& config, size_t stage) {
  const std::string& name = config.data_stages[stage].data.source;
  if (find_source(name)) return;
  std::string known;
  for (const RegisteredSource& source : registered_sources())
    known += (known.empty() ? "" : ", ") + std::string(source.name);
  throw ConfigError(config.origin + ": data_stages." + std::to_string(stage) + ".data.source: unknown data source '" +
                    name + "'; the known sources are " + known);
}

}  // namespace

void check_source_names(const TrainConfig& config) {
  for (size_t i = 0; i < config.data_stages.size(); ++i) check_source_name(config, i);
}

StageSources open_stage_sources(const SourceRequest& request) {
  check_source_name(request.config, request.stage);
  return find_source(request.stage_config().data.source)->open(request);
}

}  // namespace triax::data
