#include "triax/data/token_file.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "triax/error.hpp"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "token files are little-endian; this reader maps them in place and needs a little-endian host"
#endif

namespace triax::data {
namespace {

namespace fs = std::filesystem;

template <class Token>
uint32_t max_token(const Token* tokens, int64_t count) {
  Token largest = 0;
  for (int64_t i = 0; i < count; ++i) largest = std::max(largest, tokens[i]);  // vectorised by the compiler
  return largest;
}

template <class Token>
int64_t first_at_least(const Token* tokens, int64_t count, uint64_t limit) {
  for (int64_t i = 0; i < count; ++i)
    if (tokens[i] >= limit) return i;
  return -1;
}

template <class Token>
void widen(const Token* tokens, int64_t count, int64_t* out) {
  for (int64_t i = 0; i < count; ++i) out[i] = static_cast<int64_t>(tokens[i]);
}

}  // namespace

TokenFile::TokenFile(const std::string& path, std::optional<int> token_size_hint) : tokens_(path) {
  if (tokens_.size() == 0) throw Error(path + ": the token file is empty");
  read_metadata(path + ".metadata", token_size_hint);
  if (tokens_.size() % static_cast<size_t>(token_size_) != 0)
    throw Error(path + ": truncated: " + std::to_string(tokens_.size()) + " bytes is not a whole number of " +
                std::to_string(token_size_) + "-byte tokens");
  num_tokens_ = static_cast<int64_t>(tokens_.size()) / token_size_;
  check_index(path + ".index");
}

void TokenFile::read_metadata(const std::string& metadata_path, std::optional<int> token_size_hint) {
  token_size_ = token_size_hint.value_or(2);
  if (!fs::exists(metadata_path)) return;
  std::ifstream in(metadata_path);
  std::string first_line, count_line;
  if (!std::getline(in, first_line) || !std::getline(in, count_line))
    throw Error(metadata_path + ": expected 'TOKENIZER|TOKEN_SIZE' and the token count on the first two lines");
  const size_t bar = first_line.rfind('|');
  tokenizer_ = first_line.substr(0, bar);
  if (bar != std::string::npos) {
    const std::string size_text = first_line.substr(bar + 1);
    if (size_text != "2" && size_text != "4")
      throw Error(metadata_path + ": token size '" + size_text + "' (after '|' on the first line): expected 2 or 4");
    const int stated = std::stoi(size_text);
    if (token_size_hint && *token_size_hint != stated)
      throw Error(metadata_path + ": the file's tokens are " + size_text + " bytes, but token_size_in_bytes says " +
                  std::to_string(*token_size_hint));
    token_size_ = stated;
  }
  int64_t stated_count = -1;
  std::istringstream count_stream(count_line);
  if (!(count_stream >> stated_count) || stated_count < 0)
    throw Error(metadata_path + ": second line '" + count_line + "': expected the token count");
  const int64_t bytes = static_cast<int64_t>(tokens_.size());
  if (stated_count * token_size_ != bytes)
    throw Error(tokens_.path() + ": truncated or mismatched: the metadata states " + std::to_string(stated_count) +
                " tokens (" + std::to_string(stated_count * token_size_) + " bytes), the file holds " +
                std::to_string(bytes) + " bytes");
}

void TokenFile::check_index(const std::string& index_path) {
  if (!fs::exists(index_path)) return;
  index_.emplace(index_path);
  const size_t bytes = index_->size();
  if (bytes == 0 || bytes % sizeof(uint64_t) != 0)
    throw Error(index_path + ": " + std::to_string(bytes) +
                " bytes is not a non-empty whole number of uint64 document ends (truncated?)");
  num_documents_ = static_cast<int64_t>(bytes / sizeof(uint64_t));
  const auto* ends = reinterpret_cast<const uint64_t*>(index_->data());
  for (int64_t d = 1; d < num_documents_; ++d)
    if (ends[d] < ends[d - 1])
      throw Error(index_path + ": document " + std::to_string(d) + " ends at token " + std::to_string(ends[d]) +
                  ", before document " + std::to_string(d - 1) + " (" + std::to_string(ends[d - 1]) +
                  "): the index is corrupt");
  const uint64_t last = ends[num_documents_ - 1];
  if (last != static_cast<uint64_t>(num_tokens_))
    throw Error(index_path + ": the index disagrees with its data: the last document ends at token " +
                std::to_string(last) + ", but " + tokens_.path() + " holds " + std::to_string(num_tokens_) + " tokens");
}

void TokenFile::copy(int64_t first, int64_t count, int64_t* out) const {
  if (token_size_ == 2)
    widen(reinterpret_cast<const uint16_t*>(tokens_.data()) + first, count, out);
  else
    widen(reinterpret_cast<const uint32_t*>(tokens_.data()) + first, count, out);
}

void TokenFile::copy_document_positions(int64_t first, int64_t count, int64_t* out) const {
  if (!index_) throw Error(path() + ".index: missing: document positions need the document ends");
  const auto* ends = reinterpret_cast<const uint64_t*>(index_->data());
  // The first document end after `first`; ends equal to `first` close documents before the window.
  const uint64_t* end = std::upper_bound(ends, ends + num_documents_, static_cast<uint64_t>(first));
  int64_t position = 0;
  for (int64_t i = 0; i < count; ++i) {
    const auto token = static_cast<uint64_t>(first + i);
    while (end != ends + num_documents_ && *end <= token) {
      if (*end == token) position = 0;
      ++end;
    }
    out[i] = position++;
  }
}

void TokenFile::check_vocabulary(int64_t vocab_size, const std::string& vocab_key) const {
  const uint32_t largest = token_size_ == 2 ? max_token(reinterpret_cast<const uint16_t*>(tokens_.data()), num_tokens_)
                                            : max_token(reinterpret_cast<const uint32_t*>(tokens_.data()), num_tokens_);
  if (static_cast<int64_t>(largest) < vocab_size) return;
  const uint64_t limit = static_cast<uint64_t>(vocab_size);
  const int64_t position = token_size_ == 2
                               ? first_at_least(reinterpret_cast<const uint16_t*>(tokens_.data()), num_tokens_, limit)
                               : first_at_least(reinterpret_cast<const uint32_t*>(tokens_.data()), num_tokens_, limit);
  std::string document;
  if (index_) {
    const auto* ends = reinterpret_cast<const uint64_t*>(index_->data());
    const int64_t d = std::upper_bound(ends, ends + num_documents_, static_cast<uint64_t>(position)) - ends;
    document = " (document " + std::to_string(d) + ")";
  }
  int64_t value = 0;
  copy(position, 1, &value);
  throw Error(path() + ": token id " + std::to_string(value) + " at token position " + std::to_string(position) +
              document + " is not below the vocabulary size " + std::to_string(vocab_size) + " (" + vocab_key +
              "); the largest id in the file is " + std::to_string(largest) +
              ": was it tokenized with another tokenizer?");
}

}  // namespace triax::data
