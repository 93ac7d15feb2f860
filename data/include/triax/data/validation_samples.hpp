// The validation samples of one data stage: the samples held out of its training folders
// (data.validation.held_out_fraction), or every sample of its own validation folders
// (data.validation.dataset_folder). Validation sample j is, in a seeded order over all parts,
// one of them: a pure function of (config, j), so every topology and a resumed run evaluate
// exactly the same samples.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "triax/data/held_out_split.hpp"
#include "triax/data/sample_permutation.hpp"
#include "triax/data/token_folder.hpp"

namespace triax::data {

class ValidationSamples {
 public:
  struct Part {
    const TokenFolder* folder = nullptr;
    const HeldOutSplit* split = nullptr;  // its held-out samples; null: every sample of the folder
  };

  // `owned`: the folders the parts point into, when they are the validation set's own.
  ValidationSamples(std::vector<Part> parts, uint64_t seed, std::vector<std::unique_ptr<TokenFolder>> owned = {});

  int64_t size() const { return ends_.empty() ? 0 : ends_.back(); }
  size_t part_count() const { return parts_.size(); }
  const TokenFolder& folder(size_t part) const { return *parts_[part].folder; }
  // Which part validation sample j (< size()) comes from, and the sample index in its folder.
  std::pair<size_t, int64_t> locate(int64_t j) const;
  // Samples [first, first + count) (first + count <= size()), sequence_length + 1 tokens each,
  // each followed by its tokens' document positions when `document_positions` (TokenMixture's rows).
  void fill(int64_t first, int64_t count, int64_t* out, bool document_positions = false) const;

 private:
  std::vector<Part> parts_;
  std::vector<std::unique_ptr<TokenFolder>> owned_;
  std::vector<int64_t> ends_;  // cumulative sample counts of the parts
  std::optional<SamplePermutation> order_;
};

class TokenMixture;
struct MixtureOptions;
struct NanosetConfig;

// The validation folders of a stage (data.validation with dataset_folder; `options.key_path`
// names that key), opened and checked as training folders are, and against the stage's training
// data: a folder written by another tokenizer is refused (ConfigError naming the key and folder).
std::unique_ptr<ValidationSamples> open_validation_folders(const NanosetConfig& config, const MixtureOptions& options,
                                                           const TokenMixture& training);

}  // namespace triax::data
