#include "triax/data/training_data.hpp"

#include <ATen/ATen.h>

#include <limits>

#include "triax/report/log.hpp"
#include "triax/data/batch_prefetcher.hpp"
#include "triax/data/source_registry.hpp"
#include "triax/error.hpp"

namespace triax::data {
struct TrainingData::Stage {
  DataStageConfig config;
  int64_t first_step = 1;
  int64_t end_step = std::numeric_limits<int64_t>::max();  // first step of the next stage
  int64_t first_sample = 0;                                // global number of its first sample
  int64_t end_sample = std::numeric_limits<int64_t>::max();
  StageSources sources;  // sample n of the stage is sample n of sources.training
};

TrainingData::TrainingData(const TrainConfig& config, int64_t vocab_size, const BatchLayout& layout, bool pin_memory)
    : layout_(layout), train_steps_(config.tokens.train_steps), pin_memory_(pin_memory), origin_(config.origin) {
  const int64_t per_step = layout.samples_per_step();
  for (size_t i = 0; i < config.data_stages.size(); ++i) {
    auto stage = std::make_unique<Stage>();
    stage->config = config.data_stages[i];
    stage->first_step = stage->config.start_training_step;
    stage->first_sample = (stage->first_step - 1) * per_step;
    if (i + 1 < config.data_stages.size()) {
      stage->end_step = config.data_stages[i + 1].start_training_step;
      stage->end_sample = (stage->end_step - 1) * per_step;
    }
    stage->sources = open_stage_sources({config, i, vocab_size, layout, stage->first_sample});
    check_validation_size(*stage, i, config);
    logged_epochs_.emplace_back();
    stages_.push_back(std::move(stage));
  }
  if (stages_.empty()) throw ConfigError(config.origin + ": data_stages: no data stage");
}

TrainingData::~TrainingData() = default;

void TrainingData::check_validation_size(const Stage& stage, size_t index, const TrainConfig& config) const {
  const DataSource* validation = stage.sources.validation.get();
  if (config.tokens.val_check_interval <= 0 || !validation) return;
  const std::string key = "data_stages." + std::to_string(index) + ".data.validation";
  const int64_t needed = config.tokens.limit_val_batches * layout_.micro_batch_size * layout_.dp_size;
  if (validation->size() < needed)
    throw ConfigError(config.origin + ": tokens.limit_val_batches: " + std::to_string(config.tokens.limit_val_batches) +
                      " micro-batches of " + std::to_string(layout_.micro_batch_size) + " samples on each of " +
                      std::to_string(layout_.dp_size) + " replicas need " + std::to_string(needed) +
                      " validation samples, but " + key + " holds " + std::to_string(validation->size()) +
                      "; lower limit_val_batches or give more validation data");
}

size_t TrainingData::stage_index(int64_t step) const {
  size_t index = 0;
  for (size_t i = 0; i < stages_.size(); ++i)
    if (stages_[i]->first_step <= step) index = i;
  return index;
}

void TrainingData::fill(int64_t first, int64_t count, int64_t* out) {
  const int64_t row = layout_.row_size();
  while (count > 0) {
    size_t k = 0;
    while (k + 1 < stages_.size() && stages_[k + 1]->first_sample <= first) ++k;
    const Stage& stage = *stages_[k];
    const int64_t n = std::min(count, stage.end_sample - first);
    stage.sources.training->fill(first - stage.first_sample, n, out);
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
  if (!stage.sources.validation)
    throw Error("data stage '" + stage.config.name + "' has no validation data (data.validation)");
  at::Tensor batch = empty_batch(rows);
  stage.sources.validation->fill(first, rows, batch.data_ptr<int64_t>());
  return batch;
}

double TrainingData::waited_seconds() const { return prefetcher_ ? prefetcher_->waited_seconds() : 0.0; }

StagePosition TrainingData::stage_position(size_t k, int64_t completed_steps) {
  const Stage& stage = *stages_[k];
  StagePosition position;
  position.name = stage.config.name;
  const int64_t last = std::min(completed_steps, stage.end_step - 1);
  position.consumed_samples = std::max<int64_t>(0, last - stage.first_step + 1) * layout_.samples_per_step();
  position.datasets = stage.sources.training->position(position.consumed_samples);
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
    stage.sources.training->restore(position.consumed_samples, position.datasets, what);
    logged_epochs_[k].clear();
    for (const DatasetPosition& dataset : position.datasets) logged_epochs_[k].push_back(dataset.epoch);
  }
}

void TrainingData::after_step(int64_t step) {
  const size_t k = stage_index(step);
  const Stage& stage = *stages_[k];
  const StagePosition position = stage_position(k, step);
  logged_epochs_[k].resize(position.datasets.size(), 1);
  for (size_t i = 0; i < position.datasets.size(); ++i) {
    const DatasetPosition& dataset = position.datasets[i];
    if (dataset.epoch <= logged_epochs_[k][i]) continue;
    logged_epochs_[k][i] = dataset.epoch;
    log::info("step " + std::to_string(step) + ": data stage '" + stage.config.name + "': " + dataset.folder +
              " used all its " + std::to_string(dataset.samples_per_epoch) + " samples; epoch " +
              std::to_string(dataset.epoch) + " reads them again in a new order");
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
  line += stages_[k]->sources.training->describe_consumption(position.datasets, position.consumed_samples);
  log::info(line);
}

std::vector<std::string> TrainingData::describe() const {
  std::vector<std::string> lines;
  for (const auto& stage : stages_) {
    const std::string head =
        "data stage '" + stage->config.name + "' from step " + std::to_string(stage->config.start_training_step) + ": ";
    std::vector<std::string> own = stage->sources.training->describe();
    if (stage->sources.validation) {
      const std::vector<std::string> validation = stage->sources.validation->describe();
      own.insert(own.end(), validation.begin(), validation.end());
    }
    for (size_t i = 0; i < own.size(); ++i) lines.push_back(i == 0 ? head + own[i] : own[i]);
  }
  return lines;
}

}  // namespace triax::data
