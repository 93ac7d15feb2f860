// The `token_folders` source: a stage's TokenMixture of token folders (its nanoset `dataset`
// section), and the validation samples held out of them or read from folders of their own.
#include <sstream>

#include "sources/validation_source.hpp"
#include "triax/data/nanoset_config.hpp"
#include "triax/data/source_registry.hpp"
#include "triax/data/token_mixture.hpp"
#include "triax/error.hpp"

namespace triax::data {
namespace {

std::string percent(double fraction) {
  std::ostringstream out;
  out.precision(1);
  out << std::fixed << 100.0 * fraction << "%";
  return out.str();
}

// The epoch the last consumed sample belongs to, counted from 1 as the log and metadata.yaml say it.
int64_t epoch_of(int64_t consumed, int64_t epoch_size) { return consumed == 0 ? 1 : (consumed - 1) / epoch_size + 1; }

class TokenFolderSource : public DataSource {
 public:
  TokenFolderSource(std::unique_ptr<TokenMixture> mixture, const DataStageConfig& stage)
      : mixture_(std::move(mixture)), stage_(stage) {}

  const TokenMixture& mixture() const { return *mixture_; }

  // Samples before the first dataset wraps into a new epoch; then they repeat in a new order.
  int64_t size() const override {
    int64_t total = 0;
    for (size_t i = 0; i < mixture_->num_datasets(); ++i) total += mixture_->samples_per_epoch(i);
    return total;
  }
  void fill(int64_t first, int64_t count, int64_t* out) override { mixture_->fill(first, count, out); }
  std::vector<std::string> describe() const override;
  std::vector<DatasetPosition> position(int64_t consumed) override;
  void restore(int64_t consumed, const std::vector<DatasetPosition>& datasets, const std::string& what) override;
  std::string describe_consumption(const std::vector<DatasetPosition>& datasets, int64_t consumed) const override;

 private:
  std::unique_ptr<TokenMixture> mixture_;
  DataStageConfig stage_;
};

std::vector<std::string> TokenFolderSource::describe() const {
  const TokenMixture& mixture = *mixture_;
  std::vector<std::string> lines = {std::to_string(mixture.num_datasets()) + " token dataset(s), samples of " +
                                    std::to_string(mixture.sequence_length() + 1) + " tokens, seed " +
                                    std::to_string(stage_.data.seed)};
  for (size_t i = 0; i < mixture.num_datasets(); ++i) {
    const TokenFolder& folder = mixture.dataset(i);
    lines.push_back("  " + folder.folder() + ": weight " + percent(mixture.weight(i)) + ", " +
                    std::to_string(mixture.samples_per_epoch(i)) + " samples per epoch from " +
                    std::to_string(folder.num_tokens()) + " tokens in " + std::to_string(folder.files().size()) +
                    " file(s)" + (folder.tokenizer().empty() ? "" : ", tokenizer " + folder.tokenizer()));
  }
  return lines;
}

std::vector<DatasetPosition> TokenFolderSource::position(int64_t consumed) {
  const std::vector<int64_t> counts = mixture_->consumed(consumed);
  std::vector<DatasetPosition> datasets;
  for (size_t i = 0; i < counts.size(); ++i) {
    DatasetPosition dataset;
    dataset.folder = mixture_->dataset(i).folder();
    dataset.samples_per_epoch = mixture_->samples_per_epoch(i);
    dataset.consumed_samples = counts[i];
    dataset.consumed_tokens = counts[i] * mixture_->sequence_length();
    dataset.epoch = epoch_of(counts[i], dataset.samples_per_epoch);
    datasets.push_back(dataset);
  }
  return datasets;
}

void TokenFolderSource::restore(int64_t consumed, const std::vector<DatasetPosition>& datasets,
                                const std::string& what) {
  check_dataset_count(what, stage_.name, datasets.size(), mixture_->num_datasets());
  std::vector<int64_t> counts;
  for (size_t i = 0; i < datasets.size(); ++i) {
    const DatasetPosition& dataset = datasets[i];
    if (dataset.samples_per_epoch != mixture_->samples_per_epoch(i))
      throw Error(what + mixture_->dataset(i).folder() + " gives " + std::to_string(mixture_->samples_per_epoch(i)) +
                  " training samples per epoch now, " + std::to_string(dataset.samples_per_epoch) + " (" +
                  dataset.folder +
                  ") when the checkpoint was written: the dataset or data.validation.held_out_fraction changed");
    counts.push_back(dataset.consumed_samples);
  }
  try {
    mixture_->restore(consumed, counts);
  } catch (const Error& e) {
    throw Error(what + "data stage '" + stage_.name + "': " + e.what());
  }
}

std::string TokenFolderSource::describe_consumption(const std::vector<DatasetPosition>& datasets,
                                                    int64_t consumed) const {
  std::string text;
  for (size_t i = 0; i < datasets.size(); ++i) {
    const DatasetPosition& d = datasets[i];
    const double share = consumed ? static_cast<double>(d.consumed_samples) / static_cast<double>(consumed) : 0.0;
    text += "; " + d.folder + ": " + std::to_string(d.consumed_samples) + " samples, " +
            std::to_string(d.consumed_tokens) + " tokens (" + percent(share) + ", weight " +
            percent(mixture_->weight(i)) + "), epoch " + std::to_string(d.epoch);
  }
  return text;
}

MixtureOptions mixture_options(const SourceRequest& request) {
  const DataStageConfig& stage = request.stage_config();
  MixtureOptions options;
  options.sequence_length = request.layout.sequence_length;
  options.vocab_size = request.vocab_size;
  options.seed = static_cast<uint64_t>(stage.data.seed);
  options.key_path = request.key_path("dataset");
  options.origin = request.config.origin;
  options.held_out_fraction = stage.data.validation.held_out_fraction.value_or(0.0);
  options.held_out_key = request.key_path("validation.held_out_fraction");
  options.document_positions = request.layout.document_positions;
  return options;
}

// Held out of the training folders, folders of their own, or none.
std::unique_ptr<DataSource> open_validation(const SourceRequest& request, const MixtureOptions& training_options,
                                            const TokenMixture& training) {
  const ValidationDataConfig& given = request.stage_config().data.validation;
  std::unique_ptr<ValidationSamples> samples;
  if (given.held_out_fraction) {
    samples = training.held_out_samples();
  } else if (given.given()) {
    MixtureOptions options = training_options;
    options.key_path = request.key_path("validation");
    options.held_out_fraction = 0.0;
    samples = open_validation_folders(parse_nanoset_config(given.dataset, options.key_path, request.config.origin),
                                      options, training);
  }
  if (!samples) return nullptr;
  return std::make_unique<ValidationSource>(std::move(samples), request.layout.document_positions,
                                            given.held_out_fraction.has_value());
}

}  // namespace

StageSources open_token_folder_source(const SourceRequest& request) {
  const DataStageConfig& stage = request.stage_config();
  const YAML::Node& dataset = stage.data.dataset;
  if (!dataset.IsDefined() || dataset.IsNull())
    throw ConfigError(request.config.origin + ": " + request.key_path("source") + ": " + kTokenFoldersSource +
                      " reads the token folders of data.dataset, which is null: give a dataset section "
                      "({dataset_folder: [...]}), or set data.source to " + kSyntheticSource);
  const MixtureOptions options = mixture_options(request);
  auto mixture =
      std::make_unique<TokenMixture>(parse_nanoset_config(dataset, options.key_path, request.config.origin), options);
  StageSources sources;
  sources.validation = open_validation(request, options, *mixture);
  sources.training = std::make_unique<TokenFolderSource>(std::move(mixture), stage);
  return sources;
}

}  // namespace triax::data
