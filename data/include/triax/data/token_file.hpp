// One pre-tokenized file in the layout datatrove's DocumentTokenizer writes:
//
//   NAME.ds           token ids, little-endian uint16 (token size 2) or uint32 (token size 4)
//   NAME.ds.index     document ends in tokens, little-endian uint64, one per document
//                     (exclusive: the last equals the number of tokens)
//   NAME.ds.metadata  text: "TOKENIZER|TOKEN_SIZE", the token count, a human-readable count
//                     (files of older datatrove versions have no "|TOKEN_SIZE")
//
// The index and the metadata are optional (datatrove can be told not to write them); when
// present they must agree with the data. Tokens are read through a memory mapping.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "triax/interop/mapped_file.hpp"

namespace triax::data {

class TokenFile {
 public:
  // `token_size_hint`: the token size the config states (token_size_in_bytes), if any. A file
  // whose metadata says otherwise is refused; without metadata the hint, else 2, is used.
  TokenFile(const std::string& path, std::optional<int> token_size_hint);

  const std::string& path() const { return tokens_.path(); }
  int64_t num_tokens() const { return num_tokens_; }
  int token_size() const { return token_size_; }
  int64_t num_documents() const { return num_documents_; }     // 0 without an index
  const std::string& tokenizer() const { return tokenizer_; }  // "" without metadata

  // Tokens [first, first + count), widened to int64.
  void copy(int64_t first, int64_t count, int64_t* out) const;
  bool has_index() const { return index_.has_value(); }
  // The document positions of tokens [first, first + count), as datatrove computes them for
  // nanotron's document masking: 0 at `first` (a document cut by the window starts over) and
  // after each document end inside the window, counting up in between. Needs the index.
  void copy_document_positions(int64_t first, int64_t count, int64_t* out) const;

  // Refuses a token id >= vocab_size: one vectorisable pass over the whole file, then the first
  // offending position, its document and its value are named.
  void check_vocabulary(int64_t vocab_size, const std::string& vocab_key) const;

 private:
  void read_metadata(const std::string& metadata_path, std::optional<int> token_size_hint);
  void check_index(const std::string& index_path);

  interop::MappedFile tokens_;
  std::string tokenizer_;
  int token_size_ = 2;
  int64_t num_tokens_ = 0;
  int64_t num_documents_ = 0;
  std::optional<interop::MappedFile> index_;
};

}  // namespace triax::data
