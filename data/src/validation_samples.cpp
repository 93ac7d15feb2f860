#include "triax/data/validation_samples.hpp"

#include <algorithm>

#include "triax/data/token_mixture.hpp"
#include "triax/data/tokenizer_identity.hpp"
#include "triax/error.hpp"

namespace triax::data {
namespace {

// The key of the validation order: apart from the epochs' and the held-out choice's keys.
constexpr uint64_t kValidationOrderKey = uint64_t{3} << 62;

}  // namespace

ValidationSamples::ValidationSamples(std::vector<Part> parts, uint64_t seed,
                                     std::vector<std::unique_ptr<TokenFolder>> owned)
    : parts_(std::move(parts)), owned_(std::move(owned)) {
  int64_t total = 0;
  for (const Part& part : parts_) {
    total += part.split ? part.split->held_out_samples() : part.folder->num_samples();
    ends_.push_back(total);
  }
  if (total < 1) throw Error("the validation data holds no sample");
  order_.emplace(total, seed ^ mix64(kValidationOrderKey));
}

std::pair<size_t, int64_t> ValidationSamples::locate(int64_t j) const {
  if (j < 0 || j >= size()) throw Error("validation sample " + std::to_string(j) + " of " + std::to_string(size()));
  const int64_t position = (*order_)(j);
  const size_t part = static_cast<size_t>(std::upper_bound(ends_.begin(), ends_.end(), position) - ends_.begin());
  const int64_t local = position - (part == 0 ? 0 : ends_[part - 1]);
  return {part, parts_[part].split ? parts_[part].split->held_out_sample(local) : local};
}

void ValidationSamples::fill(int64_t first, int64_t count, int64_t* out, bool document_positions) const {
  for (int64_t n = 0; n < count; ++n) {
    const auto [part, sample] = locate(first + n);
    const TokenFolder& source = *parts_[part].folder;
    const int64_t tokens = source.sample_tokens();
    int64_t* row_out = out + n * tokens * (document_positions ? 2 : 1);
    source.copy_sample(sample, row_out, document_positions ? row_out + tokens : nullptr);
  }
}

std::unique_ptr<ValidationSamples> open_validation_folders(const NanosetConfig& config, const MixtureOptions& options,
                                                           const TokenMixture& training) {
  std::vector<std::unique_ptr<TokenFolder>> folders = open_token_folders(config, options);
  // The training data's tokenizer, as its first folder that records one names it.
  const TokenFolder* reference = nullptr;
  for (size_t i = 0; i < training.num_datasets() && !reference; ++i)
    if (!training.dataset(i).tokenizer().empty()) reference = &training.dataset(i);
  std::vector<ValidationSamples::Part> parts;
  for (size_t i = 0; i < folders.size(); ++i) {
    const TokenFolder& folder = *folders[i];
    if (reference && !folder.tokenizer().empty() &&
        tokenizer_identity(folder.tokenizer(), folder.folder()) !=
            tokenizer_identity(reference->tokenizer(), reference->folder()))
      throw ConfigError(options.origin + ": " + options.key_path + ".dataset_folder: " + folder.folder() +
                        " was tokenized with '" + folder.tokenizer() + "', but the training data (" +
                        reference->folder() + ") with '" + reference->tokenizer() +
                        "' (another tokenizer: their tokenizer.json differ); validation must read the training "
                        "tokenizer's ids");
    parts.push_back({&folder, nullptr});
  }
  return std::make_unique<ValidationSamples>(std::move(parts), options.seed, std::move(folders));
}

}  // namespace triax::data
