// A dataset folder: every NAME.ds file directly inside it (sorted by name), cut into samples of
// sequence_length + 1 consecutive tokens. As datatrove's DatatroveFolderDataset does, samples
// never span two files, consecutive samples of a file are adjacent (no token skipped between
// them), and the tail of a file too short for one more sample is left out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "triax/data/token_file.hpp"

namespace triax::data {

struct TokenFolderOptions {
  int64_t sequence_length = 0;
  std::optional<int> token_size;            // token_size_in_bytes, if the config gives it
  std::optional<int64_t> max_samples;       // from dataset_max_tokens: use only the first samples
  std::optional<uint64_t> file_order_seed;  // shuffle_files: a seeded order instead of by name
};

class TokenFolder {
 public:
  // Opens and checks every file; errors name the folder or file and what is wrong.
  TokenFolder(const std::string& folder, const TokenFolderOptions& options);

  const std::string& folder() const { return folder_; }
  int64_t num_samples() const { return num_samples_; }
  int64_t num_tokens() const { return num_tokens_; }  // in all files, tails included
  int64_t sample_tokens() const { return sample_tokens_; }  // sequence_length + 1
  const std::vector<TokenFile>& files() const { return files_; }
  const std::string& tokenizer() const { return tokenizer_; }  // as the metadata names it, or ""

  // Sample `index` (< num_samples()): sequence_length + 1 tokens into `out`, and with
  // `positions` their document positions (TokenFile::copy_document_positions) into it.
  void copy_sample(int64_t index, int64_t* out, int64_t* positions = nullptr) const;
  // Refuses a file without a document index (ds.index), naming it: document masking needs them.
  void require_document_index() const;

  // See TokenFile::check_vocabulary, for every file.
  void check_vocabulary(int64_t vocab_size, const std::string& vocab_key) const;

 private:
  std::string folder_;
  int64_t sample_tokens_ = 0;
  std::vector<TokenFile> files_;
  std::vector<int64_t> first_sample_;  // of each file, plus the total at the end
  int64_t num_samples_ = 0;
  int64_t num_tokens_ = 0;
  std::string tokenizer_;
};

}  // namespace triax::data
