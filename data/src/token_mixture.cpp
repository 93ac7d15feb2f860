#include "triax/data/token_mixture.hpp"

#include "triax/data/tokenizer_identity.hpp"
#include "triax/data/validation_samples.hpp"
#include "triax/data/sample_permutation.hpp"
#include "triax/error.hpp"

namespace triax::data {
namespace {

// Keys of the held-out choice: apart from the epochs' (dataset << 40) + epoch.
constexpr uint64_t kHeldOutKey = uint64_t{1} << 63;

}  // namespace

std::vector<std::unique_ptr<TokenFolder>> open_token_folders(const NanosetConfig& config,
                                                             const MixtureOptions& options) {
  const std::string where = options.origin + ": " + options.key_path + ".";
  if (config.vocab_size && *config.vocab_size != options.vocab_size)
    throw ConfigError(where + "vocab_size (" + std::to_string(*config.vocab_size) +
                      ") differs from model.model_config.vocab_size (" + std::to_string(options.vocab_size) + ")");
  std::vector<std::unique_ptr<TokenFolder>> folders;
  std::string tokenizer = config.tokenizer_name.value_or("");
  std::string tokenizer_source = config.tokenizer_name ? "tokenizer_name" : "";
  std::string identity = config.tokenizer_name ? tokenizer_identity(tokenizer, "") : "";
  for (size_t i = 0; i < config.dataset_folder.size(); ++i) {
    const std::string key = "dataset_folder" + (config.dataset_folder.size() > 1 ? "." + std::to_string(i) : "");
    TokenFolderOptions folder_options;
    folder_options.sequence_length = options.sequence_length;
    folder_options.token_size = config.token_size_in_bytes;
    if (config.dataset_max_tokens)
      folder_options.max_samples = (*config.dataset_max_tokens)[i] / options.sequence_length;
    if (config.shuffle_files) folder_options.file_order_seed = mix64(options.seed ^ mix64(i));
    try {
      folders.push_back(std::make_unique<TokenFolder>(config.read_folder(i), folder_options));
      folders.back()->check_vocabulary(options.vocab_size, "model.model_config.vocab_size");
      if (options.document_positions) folders.back()->require_document_index();
    } catch (const ConfigError&) {
      throw;
    } catch (const Error& e) {
      throw ConfigError(where + key + ": " + e.what());
    }
    const std::string& found = folders.back()->tokenizer();
    if (found.empty()) continue;
    // The same tokenizer recorded under two paths (each folder's own tokenizer.json) mixes.
    const std::string found_identity = tokenizer_identity(found, folders.back()->folder());
    if (tokenizer.empty()) {
      tokenizer = found;
      tokenizer_source = key;
      identity = found_identity;
    } else if (found_identity != identity) {
      throw ConfigError(where + key + ": " + folders.back()->folder() + " was tokenized with '" + found + "', but " +
                        tokenizer_source + " says '" + tokenizer +
                        "' (another tokenizer: their tokenizer.json differ); a model reads one tokenizer's ids");
    }
  }
  return folders;
}

namespace {

std::vector<HeldOutSplit> split_folders(const std::vector<std::unique_ptr<TokenFolder>>& folders,
                                        const MixtureOptions& options) {
  std::vector<HeldOutSplit> splits;
  for (size_t i = 0; i < folders.size(); ++i) {
    try {
      splits.emplace_back(folders[i]->num_samples(), options.held_out_fraction,
                          options.seed ^ mix64(kHeldOutKey + static_cast<uint64_t>(i)));
    } catch (const ConfigError& e) {
      throw ConfigError(options.origin + ": " + options.held_out_key + ": " + folders[i]->folder() + " " + e.what());
    }
  }
  return splits;
}

std::vector<double> mixture_weights(const NanosetConfig& config, const std::vector<HeldOutSplit>& splits) {
  if (config.dataset_weights) return *config.dataset_weights;
  std::vector<double> sizes;  // nanotron's default: each dataset in proportion to its size
  for (const auto& split : splits) sizes.push_back(static_cast<double>(split.training_samples()));
  return sizes;
}

}  // namespace

TokenMixture::TokenMixture(const NanosetConfig& config, const MixtureOptions& options)
    : sequence_length_(options.sequence_length),
      document_positions_(options.document_positions),
      seed_(static_cast<uint64_t>(options.seed)),
      folders_(open_token_folders(config, options)),
      splits_(split_folders(folders_, options)),
      schedule_(mixture_weights(config, splits_)),
      fill_cursor_(schedule_),
      consumed_cursor_(schedule_) {}

int64_t TokenMixture::sample_of(size_t dataset, int64_t occurrence) const {
  const HeldOutSplit& split = splits_[dataset];
  const int64_t epoch_size = split.training_samples();
  const auto epoch = static_cast<uint64_t>(occurrence / epoch_size);
  const SamplePermutation order(epoch_size, seed_ ^ mix64((static_cast<uint64_t>(dataset) << 40) + epoch));
  return split.training_sample(order(occurrence % epoch_size));
}

std::unique_ptr<ValidationSamples> TokenMixture::held_out_samples() const {
  if (splits_.empty() || splits_.front().held_out_samples() == 0) return nullptr;
  std::vector<ValidationSamples::Part> parts;
  for (size_t i = 0; i < folders_.size(); ++i) parts.push_back({folders_[i].get(), &splits_[i]});
  return std::make_unique<ValidationSamples>(std::move(parts), seed_);
}

std::pair<size_t, int64_t> TokenMixture::locate(int64_t position) {
  std::lock_guard<std::mutex> lock(fill_mutex_);
  const MixtureCursor::Pick pick = fill_cursor_.pick(position);
  return {pick.dataset, sample_of(pick.dataset, pick.occurrence)};
}

void TokenMixture::fill(int64_t first, int64_t count, int64_t* out) {
  const int64_t tokens = sequence_length_ + 1;
  const int64_t row = document_positions_ ? 2 * tokens : tokens;
  for (int64_t n = 0; n < count; ++n) {
    const auto [dataset, sample] = locate(first + n);
    int64_t* row_out = out + n * row;
    folders_[dataset]->copy_sample(sample, row_out, document_positions_ ? row_out + tokens : nullptr);
  }
}

std::vector<int64_t> TokenMixture::consumed(int64_t samples) {
  std::lock_guard<std::mutex> lock(consumed_mutex_);
  consumed_cursor_.seek(samples);
  return consumed_cursor_.counts();
}

void TokenMixture::restore(int64_t samples, const std::vector<int64_t>& counts) {
  std::scoped_lock lock(fill_mutex_, consumed_mutex_);
  consumed_cursor_.restore(samples, counts);
  fill_cursor_.restore(samples, counts);
}

}  // namespace triax::data
