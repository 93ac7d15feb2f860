#include "data/training_data.hpp"

#include <ATen/ATen.h>

#include <cstring>
#include <limits>
#include <sstream>

#include "data/batch_prefetcher.hpp"
#include "triax/core/data/nanoset_config.hpp"
#include "data/token_mixture.hpp"
#include "triax/report/log.hpp"
#include "data/synthetic_data.hpp"
#include "data/validation_samples.hpp"
#include "triax/error.hpp"

namespace triax::data {
namespace {

std::string percent(double fraction) {
  std::ostringstream out;
  out.precision(1);
  out << std::fixed << 100.0 * fraction << "%";
  return out.str();
}

// The synthetic stream's validation samples: numbered from here, beyond any training sample.
constexpr int64_t kSyntheticValidationBase = int64_t{1} << 62;

// The epoch the last consumed sample belongs to, counted from 1 as the log and metadata.yaml say it.
int64_t epoch_of(int64_t consumed, int64_t epoch_size) { return consumed == 0 ? 1 : (consumed - 1) / epoch_size + 1; }

}  // namespace

struct TrainingData::Stage {
  DataStageConfig config;
  int64_t first_step = 1;
  int64_t end_step = std::numeric_limits<int64_t>::max();  // first step of the next stage
  int64_t first_sample = 0;                                // global number of its first sample
  int64_t end_sample = std::numeric_limits<int64_t>::max();
  std::unique_ptr<SyntheticTokenStream> synthetic;
  std::unique_ptr<TokenMixture> mixture;
  std::unique_ptr<ValidationSamples> validation;  // of a mixture: held out, or folders of its own
};

TrainingData::TrainingData(const TrainConfig& config, int64_t vocab_size, const BatchLayout& layout, bool pin_memory)
    : layout_(layout), train_steps_(config.tokens.train_steps), pin_memory_(pin_memory), origin_(config.origin) {
  const int64_t per_step = layout.samples_per_step();
  for (size_t i = 0; i < config.data_stages.size(); ++i) {
    const DataStageConfig& stage_config = config.data_stages[i];
    auto stage = std::make_unique<Stage>();
    stage->config = stage_config;
    stage->first_step = stage_config.start_training_step;
    stage->first_sample = (stage->first_step - 1) * per_step;
    if (i + 1 < config.data_stages.size()) {
      stage->end_step = config.data_stages[i + 1].start_training_step;
      stage->end_sample = (stage->end_step - 1) * per_step;
    }
    const YAML::Node& dataset = stage_config.data.dataset;
    if (!dataset.IsDefined() || dataset.IsNull()) {
      if (layout.document_positions)
        throw ConfigError(config.origin + ": model.model_config._use_doc_masking: true needs documents, but data_stages." +
                          std::to_string(i) + ".data.dataset is null (the synthetic stream has none): give a token "
                          "dataset, or set _use_doc_masking to false");
      try {
        stage->synthetic = std::make_unique<SyntheticTokenStream>(vocab_size, layout.sequence_length,
                                                                  static_cast<uint64_t>(stage_config.data.seed));
      } catch (const ConfigError& e) {
        throw ConfigError(config.origin + ": model.model_config.vocab_size: " + e.what());
      }
    } else {
      MixtureOptions options;
      options.sequence_length = layout.sequence_length;
      options.vocab_size = vocab_size;
      options.seed = static_cast<uint64_t>(stage_config.data.seed);
      options.key_path = "data_stages." + std::to_string(i) + ".data.dataset";
      options.origin = config.origin;
      options.held_out_fraction = stage_config.data.validation.held_out_fraction.value_or(0.0);
      options.held_out_key = "data_stages." + std::to_string(i) + ".data.validation.held_out_fraction";
      options.document_positions = layout.document_positions;
      stage->mixture =
          std::make_unique<TokenMixture>(parse_nanoset_config(dataset, options.key_path, config.origin), options);
      open_validation(*stage, i, config, options);
    }
    logged_epochs_.emplace_back(stage->mixture ? stage->mixture->num_datasets() : 0, 1);
    stages_.push_back(std::move(stage));
  }
  if (stages_.empty()) throw ConfigError(config.origin + ": data_stages: no data stage");
}

TrainingData::~TrainingData() = default;

void TrainingData::open_validation(Stage& stage, size_t index, const TrainConfig& config,
                                   const MixtureOptions& training_options) {
  const ValidationDataConfig& given = stage.config.data.validation;
  const std::string key = "data_stages." + std::to_string(index) + ".data.validation";
  if (given.held_out_fraction) {
    stage.validation = stage.mixture->held_out_samples();
  } else if (given.given()) {
    MixtureOptions options = training_options;
    options.key_path = key;
    options.held_out_fraction = 0.0;
    stage.validation =
        open_validation_folders(parse_nanoset_config(given.dataset, key, config.origin), options, *stage.mixture);
  }
  if (config.tokens.val_check_interval <= 0 || !stage.validation) return;
  const int64_t needed = config.tokens.limit_val_batches * layout_.micro_batch_size * layout_.dp_size;
  if (stage.validation->size() < needed)
    throw ConfigError(config.origin + ": tokens.limit_val_batches: " + std::to_string(config.tokens.limit_val_batches) +
                      " micro-batches of " + std::to_string(layout_.micro_batch_size) + " samples on each of " +
                      std::to_string(layout_.dp_size) + " replicas need " + std::to_string(needed) +
                      " validation samples, but " + key + " holds " + std::to_string(stage.validation->size()) +
                      "; lower limit_val_batches or give more validation data");
}

size_t TrainingData::stage_index(int64_t step) const {
  size_t index = 0;
  for (size_t i = 0; i < stages_.size(); ++i)
    if (stages_[i]->first_step <= step) index = i;
  return index;
}

void TrainingData::fill(int64_t first, int64_t count, int64_t* out) {
  const int64_t row = (layout_.sequence_length + 1) * (layout_.document_positions ? 2 : 1);
  while (count > 0) {
    size_t k = 0;
    while (k + 1 < stages_.size() && stages_[k + 1]->first_sample <= first) ++k;
    const Stage& stage = *stages_[k];
    const int64_t n = std::min(count, stage.end_sample - first);
    if (stage.mixture) {
      stage.mixture->fill(first - stage.first_sample, n, out);
    } else {
      // The synthetic stream numbers its samples over the whole run, as it always has.
      const at::Tensor made = stage.synthetic->samples(first, n);
      std::memcpy(out, made.data_ptr<int64_t>(), static_cast<size_t>(n * row) * sizeof(int64_t));
    }
    first += n;
    count -= n;
    out += n * row;
  }
}

at::Tensor TrainingData::empty_batch(int64_t rows) const {
  const auto options = at::TensorOptions().dtype(at::kLong).pinned_memory(pin_memory_);
  if (layout_.document_positions) return at::empty({rows, 2, layout_.sequence_length + 1}, options);
  return at::empty({rows, layout_.sequence_length + 1}, options);
}

at::Tensor TrainingData::samples(int64_t first, int64_t count) {
  if (first < 0 || count < 0)
    throw Error("samples [" + std::to_string(first) + ", +" + std::to_string(count) + "): negative range");
  at::Tensor out = empty_batch(count);
  fill(first, count, out.data_ptr<int64_t>());
  return out;
}

at::Tensor TrainingData::step_samples(int64_t step) {
  const size_t k = stage_index(step);
  if (k != logged_stage_) {
    if (logged_stage_ != SIZE_MAX) {
      log_consumption(step - 1);
      log::info("step " + std::to_string(step) + ": switching to data stage '" + stages_[k]->config.name + "'");
    }
    logged_stage_ = k;
  }
  if (!prefetcher_) {
    prefetcher_ = std::make_unique<BatchPrefetcher>(
        [this](int64_t s) {
          const int64_t rows = layout_.rank_samples_per_step();
          at::Tensor batch = empty_batch(rows);
          fill((s - 1) * layout_.samples_per_step() + layout_.dp_rank * rows, rows, batch.data_ptr<int64_t>());
          return batch;
        },
        train_steps_);
  }
  return prefetcher_->get(step);
}

at::Tensor TrainingData::validation_samples(int64_t step, int64_t micro_batches) {
  const Stage& stage = *stages_[stage_index(step)];
  const int64_t rows = micro_batches * layout_.micro_batch_size;
  const int64_t first = layout_.dp_rank * rows;
  at::Tensor batch = empty_batch(rows);
  if (stage.synthetic) {
    const at::Tensor made = stage.synthetic->samples(kSyntheticValidationBase + first, rows);
    std::memcpy(batch.data_ptr<int64_t>(), made.data_ptr<int64_t>(),
                static_cast<size_t>(made.numel()) * sizeof(int64_t));
  } else if (stage.validation) {
    stage.validation->fill(first, rows, batch.data_ptr<int64_t>(), layout_.document_positions);
  } else {
    throw Error("data stage '" + stage.config.name + "' has no validation data (data.validation)");
  }
  return batch;
}

double TrainingData::waited_seconds() const { return prefetcher_ ? prefetcher_->waited_seconds() : 0.0; }

StagePosition TrainingData::stage_position(size_t k, int64_t completed_steps) {
  const Stage& stage = *stages_[k];
  StagePosition position;
  position.name = stage.config.name;
  const int64_t last = std::min(completed_steps, stage.end_step - 1);
  position.consumed_samples = std::max<int64_t>(0, last - stage.first_step + 1) * layout_.samples_per_step();
  if (stage.mixture) {
    const std::vector<int64_t> counts = stage.mixture->consumed(position.consumed_samples);
    for (size_t i = 0; i < counts.size(); ++i) {
      const TokenFolder& folder = stage.mixture->dataset(i);
      DatasetPosition dataset;
      dataset.folder = folder.folder();
      dataset.samples_per_epoch = stage.mixture->samples_per_epoch(i);
      dataset.consumed_samples = counts[i];
      dataset.consumed_tokens = counts[i] * layout_.sequence_length;
      dataset.epoch = epoch_of(counts[i], dataset.samples_per_epoch);
      position.datasets.push_back(dataset);
    }
  }
  return position;
}

DataLoaderState TrainingData::state(int64_t completed_steps) {
  DataLoaderState state;
  state.completed_steps = completed_steps;
  for (size_t k = 0; k < stages_.size(); ++k) {
    state.stages.push_back(stage_position(k, completed_steps));
    state.consumed_samples += state.stages.back().consumed_samples;
  }
  return state;
}

void TrainingData::restore(const DataLoaderState& saved) {
  const std::string what = "restoring the data position of step " + std::to_string(saved.completed_steps) + ": ";
  if (saved.stages.size() != stages_.size())
    throw Error(what + "the checkpoint has " + std::to_string(saved.stages.size()) + " data stages, the config " +
                std::to_string(stages_.size()));
  for (size_t k = 0; k < stages_.size(); ++k) {
    const Stage& stage = *stages_[k];
    const StagePosition& position = saved.stages[k];
    if (position.name != stage.config.name)
      throw Error(what + "data stage " + std::to_string(k) + " is '" + position.name + "' in the checkpoint, '" +
                  stage.config.name + "' in the config");
    const int64_t last = std::min(saved.completed_steps, stage.end_step - 1);
    const int64_t expected = std::max<int64_t>(0, last - stage.first_step + 1) * layout_.samples_per_step();
    if (position.consumed_samples != expected)
      throw Error(what + "data stage '" + position.name + "' consumed " + std::to_string(position.consumed_samples) +
                  " samples, but " + std::to_string(expected) +
                  " with this config's batch size and stage steps: were they changed?");
    const size_t datasets = stage.mixture ? stage.mixture->num_datasets() : 0;
    if (position.datasets.size() != datasets)
      throw Error(what + "data stage '" + position.name + "' mixes " + std::to_string(position.datasets.size()) +
                  " datasets in the checkpoint, " + std::to_string(datasets) + " in the config");
    if (!stage.mixture) continue;
    std::vector<int64_t> counts;
    for (size_t i = 0; i < datasets; ++i) {
      const DatasetPosition& dataset = position.datasets[i];
      const TokenFolder& folder = stage.mixture->dataset(i);
      if (dataset.samples_per_epoch != stage.mixture->samples_per_epoch(i))
        throw Error(what + folder.folder() + " gives " + std::to_string(stage.mixture->samples_per_epoch(i)) +
                    " training samples per epoch now, " + std::to_string(dataset.samples_per_epoch) + " (" +
                    dataset.folder +
                    ") when the checkpoint was written: the dataset or data.validation.held_out_fraction changed");
      counts.push_back(dataset.consumed_samples);
      logged_epochs_[k][i] = dataset.epoch;
    }
    try {
      stage.mixture->restore(position.consumed_samples, counts);
    } catch (const Error& e) {
      throw Error(what + "data stage '" + position.name + "': " + e.what());
    }
  }
}

void TrainingData::after_step(int64_t step) {
  const size_t k = stage_index(step);
  const Stage& stage = *stages_[k];
  if (stage.mixture) {
    const StagePosition position = stage_position(k, step);
    for (size_t i = 0; i < position.datasets.size(); ++i) {
      const DatasetPosition& dataset = position.datasets[i];
      if (dataset.epoch <= logged_epochs_[k][i]) continue;
      logged_epochs_[k][i] = dataset.epoch;
      log::info("step " + std::to_string(step) + ": data stage '" + stage.config.name + "': " + dataset.folder +
                " used all its " + std::to_string(dataset.samples_per_epoch) + " samples; epoch " +
                std::to_string(dataset.epoch) + " reads them again in a new order");
    }
  }
  if (step % kConsumptionLogInterval == 0 || step == train_steps_) log_consumption(step);
  if (step == train_steps_)
    log::info("data loading: the steps waited " + std::to_string(waited_seconds()) +
              " s in all for their batches (each built on a background thread during the step before)");
}

void TrainingData::log_consumption(int64_t step) {
  const size_t k = stage_index(step);
  const StagePosition position = stage_position(k, step);
  std::string line = "data consumed after step " + std::to_string(step) + ", stage '" + position.name +
                     "': " + std::to_string(position.consumed_samples) + " samples, " +
                     std::to_string(position.consumed_samples * layout_.sequence_length) + " tokens";
  for (size_t i = 0; i < position.datasets.size(); ++i) {
    const DatasetPosition& d = position.datasets[i];
    const double share = position.consumed_samples
                             ? static_cast<double>(d.consumed_samples) / static_cast<double>(position.consumed_samples)
                             : 0.0;
    line += "; " + d.folder + ": " + std::to_string(d.consumed_samples) + " samples, " +
            std::to_string(d.consumed_tokens) + " tokens (" + percent(share) + ", weight " +
            percent(stages_[k]->mixture->weight(i)) + "), epoch " + std::to_string(d.epoch);
  }
  log::info(line);
}

std::vector<std::string> TrainingData::describe() const {
  std::vector<std::string> lines;
  for (const auto& stage : stages_) {
    const std::string head =
        "data stage '" + stage->config.name + "' from step " + std::to_string(stage->config.start_training_step) + ": ";
    if (stage->synthetic) {
      lines.push_back(head + "synthetic Markov stream (seed " + std::to_string(stage->config.data.seed) +
                      "), loss floor = entropy rate " + std::to_string(SyntheticTokenStream::entropy_rate()) + " nats");
      continue;
    }
    const TokenMixture& mixture = *stage->mixture;
    lines.push_back(head + std::to_string(mixture.num_datasets()) + " token dataset(s), samples of " +
                    std::to_string(mixture.sequence_length() + 1) + " tokens, seed " +
                    std::to_string(stage->config.data.seed));
    for (size_t i = 0; i < mixture.num_datasets(); ++i) {
      const TokenFolder& folder = mixture.dataset(i);
      lines.push_back("  " + folder.folder() + ": weight " + percent(mixture.weight(i)) + ", " +
                      std::to_string(mixture.samples_per_epoch(i)) + " samples per epoch from " +
                      std::to_string(folder.num_tokens()) + " tokens in " + std::to_string(folder.files().size()) +
                      " file(s)" + (folder.tokenizer().empty() ? "" : ", tokenizer " + folder.tokenizer()));
    }
    if (stage->validation)
      lines.push_back("  validation: " + std::to_string(stage->validation->size()) + " samples (" +
                      (stage->config.data.validation.held_out_fraction
                           ? "held out of the folders above, never trained on"
                           : std::to_string(stage->validation->part_count()) + " folder(s) of their own") +
                      ")");
  }
  return lines;
}

}  // namespace triax::data
