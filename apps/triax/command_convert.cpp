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
#include <optional>
#include <stdexcept>

#include "commands.hpp"
#include "parsed_options.hpp"
#include "triax/convert/hf_conversion.hpp"
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

// The options of `triax convert`, as given.
struct ConvertOptions {
  bool to_hf = true;  // --to hf; else --from hf
  std::string input, output;
  std::optional<at::ScalarType> dtype;  // --to hf: the weights' type; empty: as trained
  int64_t max_shard_bytes = 5'000'000'000;
};

po::options_description convert_option_table(std::string& to, std::string& from, std::string& dtype,
                                             int64_t& max_shard_bytes, std::vector<std::string>& paths) {
  po::options_description options("triax convert options");
  options.add_options()("help,h", "show this help")("to", po::value<std::string>(&to),
                                                    "export a triax checkpoint: --to hf CHECKPOINT OUT")(
      "from", po::value<std::string>(&from), "import into a triax checkpoint: --from hf HF_FOLDER OUT")(
      "dtype", po::value<std::string>(&dtype),
      "--to hf: weights in float32, bfloat16 or float16 (default: as trained)")(
      "max-shard-size", po::value<int64_t>(&max_shard_bytes)->default_value(max_shard_bytes),
      "--to hf: bytes per safetensors file before sharding")("paths", po::value<std::vector<std::string>>(&paths),
                                                             "input and output folders");
  return options;
}

// --dtype's type, or nothing for ""; an unknown name throws its message.
std::optional<at::ScalarType> weight_type(const std::string& dtype) {
  if (dtype == "float32") return at::kFloat;
  if (dtype == "bfloat16") return at::kBFloat16;
  if (dtype == "float16") return at::kHalf;
  if (!dtype.empty())
    throw std::invalid_argument("--dtype: expected float32, bfloat16 or float16, got '" + dtype + "'");
  return std::nullopt;
}

Parsed<ConvertOptions> parse_convert_options(const std::vector<std::string>& args) {
  ConvertOptions parsed;
  std::string to, from, dtype;
  std::vector<std::string> paths;
  const po::options_description options = convert_option_table(to, from, dtype, parsed.max_shard_bytes, paths);
  po::positional_options_description positional;
  positional.add("paths", 2);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(options).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "triax convert: " << e.what() << "\n" << options;
    return Parsed<ConvertOptions>::leave(kExitInvalidConfig);
  }
  if (vm.count("help")) {
    std::cout << "usage: triax convert --to hf CHECKPOINT OUT | triax convert --from hf HF_FOLDER OUT\n" << options;
    return Parsed<ConvertOptions>::leave(kExitOk);
  }
  if ((to.empty() == from.empty()) || (!to.empty() && to != "hf") || (!from.empty() && from != "hf") ||
      paths.size() != 2) {
    std::cerr << "triax convert: expected --to hf CHECKPOINT OUT or --from hf HF_FOLDER OUT\n" << options;
    return Parsed<ConvertOptions>::leave(kExitInvalidConfig);
  }
  parsed.to_hf = !to.empty();
  parsed.input = paths[0];
  parsed.output = paths[1];
  try {
    if (parsed.to_hf) parsed.dtype = weight_type(dtype);  // --from hf keeps the folder's types
  } catch (const std::invalid_argument& e) {
    std::cerr << "triax convert: " << e.what() << "\n";
    return Parsed<ConvertOptions>::leave(kExitInvalidConfig);
  }
  return parsed;
}

void write_hf_folder(const PluginRegistry& registry, const ConvertOptions& options) {
  checkpoint::export_to_hf(registry, options.input, options.output, options.dtype, options.max_shard_bytes);
  // The tokenizer the run's data was made with, where one is found (as `triax generate` finds it).
  const auto tokenizer = generation::find_tokenizer(generation::spec_from_folder(registry, options.input));
  if (tokenizer) copy_tokenizer(*tokenizer, options.output);
  // Said once everything is written: a later failure never follows a success line.
  std::cout << "wrote the Hugging Face folder " << options.output << "\n";
  if (tokenizer) std::cout << "with the tokenizer " << *tokenizer << "\n";
}

void write_triax_checkpoint(const PluginRegistry& registry, const ConvertOptions& options) {
  const std::string step = checkpoint::import_from_hf(registry, options.input, options.output);
  // The folder's tokenizer beside the step folder, where `triax generate` and an export look.
  const std::filesystem::path tokenizer = std::filesystem::path(options.input) / "tokenizer.json";
  const bool has_tokenizer = std::filesystem::is_regular_file(tokenizer);
  if (has_tokenizer) copy_tokenizer(tokenizer.string(), options.output);
  std::cout << "wrote the triax checkpoint " << step
            << "; train from it with model.init_method.path: " << options.output << "\n";
  if (has_tokenizer) std::cout << "with the tokenizer " << tokenizer.string() << "\n";
}

int run_convert(const ConvertOptions& options) {
  try {
    PluginRegistry registry;
    registry.scan_search_paths();
    if (options.to_hf)
      write_hf_folder(registry, options);
    else
      write_triax_checkpoint(registry, options);
    return kExitOk;
  } catch (const std::exception& e) {
    std::cerr << "triax convert: " << e.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace

int run_convert_command(const std::vector<std::string>& args) {
  return run_parsed(parse_convert_options(args), run_convert);
}

}  // namespace triax::cli
