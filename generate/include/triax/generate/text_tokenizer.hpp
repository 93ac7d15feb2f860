// Text <-> token ids for `triax generate`, through Hugging Face's `tokenizers` library (the one
// that writes tokenizer.json): a short-lived Python process per call runs the bridge script
// built into triax (generate/src/tokenizer_bridge.py). docs/generation.md says why.
//
// The interpreter is $TRIAX_PYTHON, else the one the build was configured with (the project's
// .venv after tools/setup.sh).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace triax::generation {

class TextTokenizer {
 public:
  // `path`: a tokenizer.json file. Nothing is started until the first call.
  explicit TextTokenizer(std::string path);

  const std::string& path() const { return path_; }

  struct Encoded {
    std::vector<std::vector<int64_t>> ids;  // one list per text
    int64_t vocab_size = 0;
    std::vector<int64_t> eos;  // the tokenizer's end-of-text token, when it has one
    std::string eos_token;     // its name ("<|endoftext|>")
  };
  // Special tokens (a BOS the tokenizer's post-processor adds) as transformers' tokenizer() adds them.
  Encoded encode(const std::vector<std::string>& texts, bool add_special_tokens = true) const;
  // Special tokens are left out of the text.
  std::vector<std::string> decode(const std::vector<std::vector<int64_t>>& ids) const;

  // The interpreter the bridge runs with.
  static std::string python();

 private:
  std::string path_;
};

}  // namespace triax::generation
