// data_stages: the training data per stage (a Hugging Face or nanoset dataset spec, or null for
// the synthetic stream, and the data source that reads it), sorted by start step; without the
// section, one synthetic stage.
#include <algorithm>
#include <map>

#include "config_sections.hpp"

namespace triax::config {
namespace {

// nanotron's default when data_stages is absent: one stage of the synthetic stream from step 1.
std::vector<DataStageConfig> default_stage(ConfigReader& root, const GeneralConfig& general,
                                           const TokensConfig& tokens) {
  root.raw("data_stages");
  DataStageConfig stage;
  stage.name = "default";
  stage.start_training_step = 1;
  stage.data.source = kSyntheticSource;
  stage.data.dataset = YAML::Node(YAML::NodeType::Null);
  stage.data.seed = general.seed;

  YAML::Node data(YAML::NodeType::Map);
  data["dataset"] = YAML::Node(YAML::NodeType::Null);
  data["source"] = stage.data.source;  // where a read stage's default lands: after the keys given
  data["seed"] = stage.data.seed;
  data["num_loading_workers"] = stage.data.num_loading_workers;
  data["validation"] = YAML::Node(YAML::NodeType::Null);
  YAML::Node item(YAML::NodeType::Map);
  item["name"] = stage.name;
  item["start_training_step"] = stage.start_training_step;
  item["data"] = data;
  item["sequence_length"] = tokens.sequence_length;
  YAML::Node list(YAML::NodeType::Sequence);
  list.push_back(item);
  root.resolved()["data_stages"] = list;
  return {stage};
}

// data.validation: a held-out fraction of the training folders, or folders of its own; required
// of a stage of token folders when the run validates (tokens.val_check_interval > 0).
ValidationDataConfig read_validation(ConfigReader& data, bool synthetic, const TokensConfig& tokens) {
  ValidationDataConfig v;
  if (!data.contains("validation")) {
    data.ignore("validation");
    if (tokens.val_check_interval > 0 && !synthetic)
      data.fail("validation", "tokens.val_check_interval is " + std::to_string(tokens.val_check_interval) +
                                  ", but this stage has no validation data; give held_out_fraction (e.g. 0.01 of "
                                  "every training folder, never trained on) or dataset_folder (token folders of "
                                  "its own), or set tokens.val_check_interval to -1");
    return v;
  }
  if (synthetic)
    data.fail("validation",
              "the synthetic stream (dataset: null) validates on held-out samples of its own stream; remove "
              "this key");
  const YAML::Node node = data.raw("validation");
  if (!node.IsMap() || !(node["held_out_fraction"] || node["dataset_folder"]))
    data.fail("validation",
              "expected a mapping with held_out_fraction (a share of every training folder's samples, held out "
              "and never trained on) or dataset_folder (token folders of its own)");
  if (!node["held_out_fraction"]) {
    v.dataset = YAML::Clone(node);  // a nanoset section, read strictly when the data is opened
    return v;
  }
  ConfigReader r(node, data.key_path("validation"), data.origin());
  v.held_out_fraction = r.required<double>("held_out_fraction");
  if (!(*v.held_out_fraction > 0.0 && *v.held_out_fraction < 1.0))
    r.fail("held_out_fraction", std::to_string(*v.held_out_fraction) +
                                    " is not strictly between 0 and 1 (the share of each training folder's "
                                    "samples held out for validation)");
  if (node["dataset_folder"])
    r.fail("dataset_folder", "give either held_out_fraction or dataset_folder, not both");
  r.finish();
  return v;
}

DataStageConfig read_stage(ConfigReader& r, const TokensConfig& tokens) {
  DataStageConfig stage;
  stage.name = r.required<std::string>("name");
  if (stage.name.empty()) r.fail("name", "must not be empty");
  stage.start_training_step = required_int(r, "start_training_step", 1);

  ConfigReader d = r.section("data");
  YAML::Node dataset = d.raw("dataset");
  if (dataset.IsDefined() && !dataset.IsNull() && !dataset.IsMap())
    d.fail("dataset",
           "expected a mapping (a Hugging Face dataset spec with hf_dataset_or_datasets, or a nanoset "
           "spec with dataset_folder) or null for the synthetic stream");
  stage.data.dataset = dataset.IsDefined() ? YAML::Clone(dataset) : YAML::Node(YAML::NodeType::Null);
  // A triax key: nanotron configs name no source, and get the one their dataset implies.
  stage.data.source =
      d.get<std::string>("source", stage.data.dataset.IsNull() ? kSyntheticSource : kTokenFoldersSource);
  if (stage.data.source.empty()) d.fail("source", "must not be empty");
  stage.data.seed = int_or(d, "seed", stage.data.seed, 0, INT64_MAX);
  stage.data.num_loading_workers = int_or(d, "num_loading_workers", stage.data.num_loading_workers, 0);
  stage.data.validation = read_validation(d, stage.data.dataset.IsNull(), tokens);
  d.finish();

  // Newer nanotron lets a stage set its own sequence length; triax trains with one.
  std::optional<int64_t> length = r.optional<int64_t>("sequence_length");
  if (length && *length != tokens.sequence_length)
    r.fail("sequence_length",
           "triax does not implement a per-stage sequence length; remove it or set it to "
           "tokens.sequence_length (" +
               std::to_string(tokens.sequence_length) + ")");
  r.resolved()["sequence_length"] = tokens.sequence_length;
  r.finish();
  return stage;
}

// Names and start steps are unique, and one stage starts at step 1.
void check_stages(ConfigReader& root, std::vector<ConfigReader>& readers, const std::vector<DataStageConfig>& stages) {
  std::map<std::string, size_t> names;
  std::map<int64_t, size_t> starts;
  for (size_t i = 0; i < stages.size(); ++i) {
    auto [name_at, new_name] = names.emplace(stages[i].name, i);
    if (!new_name)
      readers[i].fail("name", "'" + stages[i].name + "' is also the name of data_stages." +
                                  std::to_string(name_at->second) + "; stage names must be unique");
    auto [start_at, new_start] = starts.emplace(stages[i].start_training_step, i);
    if (!new_start)
      readers[i].fail("start_training_step", std::to_string(stages[i].start_training_step) +
                                                 " is also the start of data_stages." +
                                                 std::to_string(start_at->second) + "; start steps must be unique");
  }
  if (!starts.count(1)) {
    std::string listed;
    for (const auto& [start, index] : starts) listed += (listed.empty() ? "" : ", ") + std::to_string(start);
    root.fail("data_stages", "no stage starts at step 1 (start_training_step values: " + listed +
                                 "); the first stage must start at step 1");
  }
}

}  // namespace

std::vector<DataStageConfig> read_data_stages(ConfigReader& root, const GeneralConfig& general,
                                              const TokensConfig& tokens) {
  if (!root.contains("data_stages")) return default_stage(root, general, tokens);

  std::vector<ConfigReader> readers = root.section_list("data_stages");
  if (readers.empty()) root.fail("data_stages", "the list is empty; give at least one stage starting at step 1");
  std::vector<DataStageConfig> stages;
  for (auto& r : readers) stages.push_back(read_stage(r, tokens));
  check_stages(root, readers, stages);

  // Sorted by start step, in the config and in resolved().
  std::vector<size_t> order(stages.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&stages](size_t a, size_t b) {
    return stages[a].start_training_step < stages[b].start_training_step;
  });
  std::vector<DataStageConfig> sorted;
  YAML::Node resolved_list(YAML::NodeType::Sequence);
  for (size_t i : order) {
    sorted.push_back(stages[i]);
    resolved_list.push_back(YAML::Clone(readers[i].resolved()));
  }
  root.resolved()["data_stages"] = resolved_list;
  return sorted;
}

}  // namespace triax::config
