// The token datasets of one data stage, mixed by weight: sample n of the stage comes from the
// dataset the MixtureSchedule assigns to n; the k-th sample a dataset gives is sample
// permutation_e(k mod N) of its folder, where N is the folder's sample count, e = k / N the
// epoch, and permutation_e a SamplePermutation keyed by (data seed, dataset, epoch); with
// held-out data, N counts only the training samples (HeldOutSplit). A dataset
// that runs out thus wraps into a new epoch in a new order. Everything is a pure function of
// (config, n): any rank can build any sample, and a resumed run continues exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "triax/data/held_out_split.hpp"
#include "triax/data/mixture_schedule.hpp"
#include "triax/data/nanoset_config.hpp"
#include "triax/data/token_folder.hpp"

namespace triax::data {

struct MixtureOptions {
  int64_t sequence_length = 0;
  int64_t vocab_size = 0;  // model.model_config.vocab_size: every token id must be below it
  uint64_t seed = 0;       // the stage's data.seed
  std::string key_path;    // "data_stages.0.data.dataset", for messages
  std::string origin;      // the config file, for messages
  double held_out_fraction = 0.0;  // data.validation.held_out_fraction: per folder, never trained on
  std::string held_out_key;        // "data_stages.0.data.validation.held_out_fraction", for messages
  // Each sample also carries its tokens' document positions (model_config._use_doc_masking):
  // every file must have its document index.
  bool document_positions = false;
};

class ValidationSamples;

// Opens and checks the folders of a nanoset section: vocabulary, and one tokenizer for all
// (ConfigError naming the key and file on bad input).
std::vector<std::unique_ptr<TokenFolder>> open_token_folders(const NanosetConfig& config,
                                                             const MixtureOptions& options);

class TokenMixture {
 public:
  // Opens and checks every folder (ConfigError naming the key and file on bad input).
  TokenMixture(const NanosetConfig& config, const MixtureOptions& options);

  size_t num_datasets() const { return folders_.size(); }
  const TokenFolder& dataset(size_t i) const { return *folders_[i]; }
  double weight(size_t i) const { return schedule_.weight(i); }
  // Samples dataset i gives per epoch: its folder's, less those held out for validation.
  int64_t samples_per_epoch(size_t i) const { return splits_[i].training_samples(); }
  // The samples held out of every folder (data.validation.held_out_fraction), or null without.
  std::unique_ptr<ValidationSamples> held_out_samples() const;
  int64_t sequence_length() const { return sequence_length_; }

  // Samples [first, first + count) of the stage, each sequence_length + 1 tokens, into `out`;
  // with document positions, each sample's tokens followed by their positions.
  void fill(int64_t first, int64_t count, int64_t* out);
  // Which dataset sample `position` of the stage comes from, and that dataset's sample index.
  std::pair<size_t, int64_t> locate(int64_t position);

  // How many of the stage's first `samples` samples each dataset gave.
  std::vector<int64_t> consumed(int64_t samples);
  // Continues from a saved position (see MixtureCursor::restore); checked against the schedule.
  void restore(int64_t samples, const std::vector<int64_t>& counts);

 private:
  int64_t sample_of(size_t dataset, int64_t occurrence) const;

  int64_t sequence_length_;
  bool document_positions_;
  uint64_t seed_;
  std::vector<std::unique_ptr<TokenFolder>> folders_;
  std::vector<HeldOutSplit> splits_;  // per folder: what training may read
  MixtureSchedule schedule_;
  std::mutex fill_mutex_;  // the loader thread and direct callers share fill_cursor_
  MixtureCursor fill_cursor_;
  std::mutex consumed_mutex_;
  MixtureCursor consumed_cursor_;  // the main thread's, for logs and checkpoints
};

}  // namespace triax::data
