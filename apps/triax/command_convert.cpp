// `triax convert --to hf CHECKPOINT OUT [--dtype D] [--max-shard-size BYTES]`: a triax checkpoint
// as a Hugging Face folder, through the Hugging Face mapping of the model plugin its metadata
// names, with the tokenizer.json the run's data was made with when one is found.
// `triax convert --from hf HF_FOLDER OUT`: a Hugging Face folder as a triax checkpoint
// folder (weights only; start training from it with model.init_method.path, at any topology),
// read by the model plugin whose mapping lists config.json's architecture, with its tokenizer.json
// beside the step folder. Plugins are found as
// `triax train` finds them (the build's plugin folder, then TRIAX_PLUGIN_PATH).
#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>

#include "commands.hpp"
#include "triax/core/checkpoint/hf_conversion.hpp"
#include "triax/generate/generation_model.hpp"
#include "triax/core/plugins/plugin_registry.hpp"
#include "triax/error.hpp"

namespace triax::cli {
namespace po = boost::program_options;
namespace {

void copy_tokenizer(const std::string& tokenizer, const std::string& folder) {
  std::filesystem::copy_file(tokenizer, std::filesystem::path(folder) / "tokenizer.json",
                             std::filesystem::copy_options::overwrite_existing);
}

}  // namespace

int run_convert_command(const std::vector<std::string>& args) {
  po::options_description options("triax convert options");
  std::string to, from, dtype;
  int64_t max_shard_bytes = 5'000'000'000;
  std::vector<std::string> paths;
  options.add_options()("help,h", "show this help")("to", po::value<std::string>(&to),
                                                    "export a triax checkpoint: --to hf CHECKPOINT OUT")(
      "from", po::value<std::string>(&from), "import into a triax checkpoint: --from hf HF_FOLDER OUT")(
      "dtype", po::value<std::string>(&dtype),
      "--to hf: weights in float32, bfloat16 or float16 (default: as trained)")(
      "max-shard-size", po::value<int64_t>(&max_shard_bytes)->default_value(max_shard_bytes),
      "--to hf: bytes per safetensors file before sharding")("paths", po::value<std::vector<std::string>>(&paths),
                                                             "input and output folders");
  po::positional_options_description positional;
  positional.add("paths", 2);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(options).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "triax convert: " << e.what() << "\n" << options;
    return kExitInvalidConfig;
  }
  if (vm.count("help")) {
    std::cout << "usage: triax convert --to hf CHECKPOINT OUT | triax convert --from hf HF_FOLDER OUT\n" << options;
    return kExitOk;
  }
  if ((to.empty() == from.empty()) || (!to.empty() && to != "hf") || (!from.empty() && from != "hf") ||
      paths.size() != 2) {
    std::cerr << "triax convert: expected --to hf CHECKPOINT OUT or --from hf HF_FOLDER OUT\n" << options;
    return kExitInvalidConfig;
  }
  try {
    PluginRegistry registry;
    registry.scan_search_paths();
    if (!to.empty()) {
      std::optional<at::ScalarType> type;
      if (dtype == "float32")
        type = at::kFloat;
      else if (dtype == "bfloat16")
        type = at::kBFloat16;
      else if (dtype == "float16")
        type = at::kHalf;
      else if (!dtype.empty()) {
        std::cerr << "triax convert: --dtype: expected float32, bfloat16 or float16, got '" << dtype << "'\n";
        return kExitInvalidConfig;
      }
      checkpoint::export_to_hf(registry, paths[0], paths[1], type, max_shard_bytes);
      // The tokenizer the run's data was made with, where one is found (as `triax generate` finds it).
      const auto tokenizer = generation::find_tokenizer(generation::spec_from_folder(registry, paths[0]));
      if (tokenizer) copy_tokenizer(*tokenizer, paths[1]);
      // Said once everything is written: a later failure never follows a success line.
      std::cout << "wrote the Hugging Face folder " << paths[1] << "\n";
      if (tokenizer) std::cout << "with the tokenizer " << *tokenizer << "\n";
    } else {
      const std::string step = checkpoint::import_from_hf(registry, paths[0], paths[1]);
      // The folder's tokenizer beside the step folder, where `triax generate` and an export look.
      const std::filesystem::path tokenizer = std::filesystem::path(paths[0]) / "tokenizer.json";
      const bool has_tokenizer = std::filesystem::is_regular_file(tokenizer);
      if (has_tokenizer) copy_tokenizer(tokenizer.string(), paths[1]);
      std::cout << "wrote the triax checkpoint " << step << "; train from it with model.init_method.path: " << paths[1]
                << "\n";
      if (has_tokenizer) std::cout << "with the tokenizer " << tokenizer.string() << "\n";
    }
    return kExitOk;
  } catch (const std::exception& e) {
    std::cerr << "triax convert: " << e.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace triax::cli
