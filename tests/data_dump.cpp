// Test helper: prints the samples of a token folder, one line of space-separated ids per sample,
// for comparison with what datatrove's own reader gives; with `positions`, the samples' document
// positions instead (document masking).
//   data_dump <folder> <sequence_length> <vocab_size> [positions]
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "triax/data/token_folder.hpp"

int main(int argc, char** argv) {
  if (argc != 4 && !(argc == 5 && std::string(argv[4]) == "positions")) {
    std::cerr << "usage: data_dump <folder> <sequence_length> <vocab_size> [positions]\n";
    return 2;
  }
  try {
    triax::data::TokenFolderOptions options;
    options.sequence_length = std::atoll(argv[2]);
    triax::data::TokenFolder folder(argv[1], options);
    folder.check_vocabulary(std::atoll(argv[3]), "vocab_size");
    std::vector<int64_t> tokens(static_cast<size_t>(options.sequence_length + 1)), positions(tokens.size());
    const bool dump_positions = argc == 5;
    const std::vector<int64_t>& sample = dump_positions ? positions : tokens;
    for (int64_t i = 0; i < folder.num_samples(); ++i) {
      folder.copy_sample(i, tokens.data(), dump_positions ? positions.data() : nullptr);
      for (size_t t = 0; t < sample.size(); ++t) std::cout << (t ? " " : "") << sample[t];
      std::cout << '\n';
    }
  } catch (const std::exception& e) {
    std::cerr << e.what() << '\n';
    return 1;
  }
  return 0;
}
