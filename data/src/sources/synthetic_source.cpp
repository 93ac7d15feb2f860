// The `synthetic` source: SyntheticTokenStream, numbered over the whole run, and its validation
// samples, numbered from far beyond any training sample.
#include <ATen/ATen.h>

#include <cstring>
#include <memory>

#include "triax/data/source_registry.hpp"
#include "triax/data/synthetic_data.hpp"
#include "triax/error.hpp"

namespace triax::data {
namespace {

// The stream's validation samples: numbered from here, beyond any training sample.
constexpr int64_t kValidationBase = int64_t{1} << 62;

class SyntheticSource : public DataSource {
 public:
  // Sample n of the source is sample `base` + n of the stream.
  SyntheticSource(std::shared_ptr<const SyntheticTokenStream> stream, int64_t base, const DataStageConfig& stage,
                  bool validation)
      : stream_(std::move(stream)), base_(base), seed_(stage.data.seed), stage_name_(stage.name),
        validation_(validation) {}

  int64_t size() const override { return kUnbounded; }
  void fill(int64_t first, int64_t count, int64_t* out) override {
    const at::Tensor made = stream_->samples(base_ + first, count);
    std::memcpy(out, made.data_ptr<int64_t>(), static_cast<size_t>(made.numel()) * sizeof(int64_t));
  }
  // The stream's line covers its validation samples too.
  std::vector<std::string> describe() const override {
    if (validation_) return {};
    return {"synthetic Markov stream (seed " + std::to_string(seed_) + "), loss floor = entropy rate " +
            std::to_string(SyntheticTokenStream::entropy_rate()) + " nats"};
  }
  // A sample is a function of its number alone: the consumed count is the whole position.
  std::vector<DatasetPosition> position(int64_t) override { return {}; }
  void restore(int64_t, const std::vector<DatasetPosition>& datasets, const std::string& what) override {
    check_dataset_count(what, stage_name_, datasets.size(), 0);
  }

 private:
  std::shared_ptr<const SyntheticTokenStream> stream_;
  int64_t base_;
  int64_t seed_;
  std::string stage_name_;
  bool validation_;
};

void check_synthetic_stage(const SourceRequest& request) {
  const TrainConfig& config = request.config;
  const YAML::Node& dataset = request.stage_config().data.dataset;
  if (dataset.IsDefined() && !dataset.IsNull())
    throw ConfigError(config.origin + ": " + request.key_path("dataset") +
                      ": the synthetic stream (data.source: synthetic) reads no dataset; remove it, or set "
                      "data.source to " + kTokenFoldersSource + " to read it");
  if (request.layout.document_positions)
    throw ConfigError(config.origin + ": model.model_config._use_doc_masking: true needs documents, but " +
                      request.key_path("dataset") + " is null (the synthetic stream has none): give a token "
                      "dataset, or set _use_doc_masking to false");
}

}  // namespace

StageSources open_synthetic_source(const SourceRequest& request) {
  check_synthetic_stage(request);
  const DataStageConfig& stage = request.stage_config();
  std::shared_ptr<const SyntheticTokenStream> stream;
  try {
    stream = std::make_shared<const SyntheticTokenStream>(request.vocab_size, request.layout.sequence_length,
                                                          static_cast<uint64_t>(stage.data.seed));
  } catch (const ConfigError& e) {
    throw ConfigError(request.config.origin + ": model.model_config.vocab_size: " + e.what());
  }
  // The stream numbers its samples over the whole run, as it always has.
  StageSources sources;
  sources.training = std::make_unique<SyntheticSource>(stream, request.first_sample, stage, false);
  sources.validation = std::make_unique<SyntheticSource>(stream, kValidationBase, stage, true);
  return sources;
}

}  // namespace triax::data
