#include "triax/data/token_folder.hpp"

#include <algorithm>
#include <filesystem>
#include <random>

#include "triax/error.hpp"

namespace triax::data {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> token_files_in(const std::string& folder) {
  std::error_code ec;
  if (!fs::exists(folder, ec)) throw Error(folder + ": no such folder");
  if (!fs::is_directory(folder, ec)) throw Error(folder + ": not a folder (expected a folder of *.ds token files)");
  std::vector<std::string> paths;
  for (const auto& entry : fs::directory_iterator(folder, ec))
    if (entry.path().extension() == ".ds" && !entry.is_directory()) paths.push_back(entry.path().string());
  if (ec) throw Error(folder + ": cannot list: " + ec.message());
  if (paths.empty()) throw Error(folder + ": holds no *.ds token file");
  std::sort(paths.begin(), paths.end());
  return paths;
}

}  // namespace

TokenFolder::TokenFolder(const std::string& folder, const TokenFolderOptions& options)
    : folder_(folder), sample_tokens_(options.sequence_length + 1) {
  std::vector<std::string> paths = token_files_in(folder);
  if (options.file_order_seed) std::shuffle(paths.begin(), paths.end(), std::mt19937_64(*options.file_order_seed));
  int64_t longest = 0;
  first_sample_.push_back(0);
  for (const auto& path : paths) {
    files_.emplace_back(path, options.token_size);
    const TokenFile& file = files_.back();
    if (!file.tokenizer().empty()) {
      if (tokenizer_.empty()) tokenizer_ = file.tokenizer();
      if (file.tokenizer() != tokenizer_)
        throw Error(path + ": tokenized with '" + file.tokenizer() + "', but other files of " + folder + " with '" +
                    tokenizer_ + "'");
    }
    num_tokens_ += file.num_tokens();
    longest = std::max(longest, file.num_tokens());
    first_sample_.push_back(first_sample_.back() + file.num_tokens() / sample_tokens_);
  }
  num_samples_ = first_sample_.back();
  if (num_samples_ == 0)
    throw Error(folder + ": a sample needs sequence_length + 1 = " + std::to_string(sample_tokens_) +
                " consecutive tokens of one file, but the longest of its " + std::to_string(files_.size()) +
                " file(s) holds " + std::to_string(longest) +
                " tokens: the sequence is longer than this dataset can serve");
  if (options.max_samples) {
    if (*options.max_samples < 1)
      throw Error(folder + ": dataset_max_tokens leaves less than one sample of " +
                  std::to_string(options.sequence_length) + " tokens");
    num_samples_ = std::min(num_samples_, *options.max_samples);
  }
}

void TokenFolder::copy_sample(int64_t index, int64_t* out, int64_t* positions) const {
  const auto file = std::upper_bound(first_sample_.begin(), first_sample_.end(), index) - first_sample_.begin() - 1;
  const int64_t within = index - first_sample_[static_cast<size_t>(file)];
  files_[static_cast<size_t>(file)].copy(within * sample_tokens_, sample_tokens_, out);
  if (positions)
    files_[static_cast<size_t>(file)].copy_document_positions(within * sample_tokens_, sample_tokens_, positions);
}

void TokenFolder::require_document_index() const {
  for (const auto& file : files_)
    if (!file.has_index())
      throw Error(file.path() + ".index: missing: document masking needs each file's document ends (datatrove "
                                "writes them unless told not to)");
}

void TokenFolder::check_vocabulary(int64_t vocab_size, const std::string& vocab_key) const {
  for (const auto& file : files_) file.check_vocabulary(vocab_size, vocab_key);
}

}  // namespace triax::data
