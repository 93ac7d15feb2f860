#include "generate_options.hpp"

#include <boost/program_options.hpp>
#include <iostream>

namespace triax::cli {
namespace {

namespace po = boost::program_options;

// The flags, bound to the fields of `f` (which must outlive the parse).
po::options_description generate_option_table(GenerateOptions& f) {
  po::options_description options("triax generate options");
  options.add_options()("help,h", "show this help")("model", po::value<std::string>(&f.model),
                                                    "a triax checkpoint (run or step folder) or a Hugging Face folder")(
      "config,c", po::value<std::string>(&f.config),
      "instead of MODEL: a training config's model (init_method.path weights, else its own initialisation)")(
      "set", po::value<std::vector<std::string>>(&f.sets)->composing(), "with --config: override a config value")(
      "prompt,p", po::value<std::vector<std::string>>(&f.prompts)->composing(),
      "a prompt as text, through the model's tokenizer.json (repeatable: a batch)")(
      "prompt-ids", po::value<std::vector<std::string>>(&f.prompt_ids)->composing(),
      "a prompt as token ids, \"1,2,3\" (repeatable: a batch)")("tokenizer", po::value<std::string>(&f.tokenizer),
                                                                "tokenizer.json to use (default: the model's)")(
      "max-new-tokens,n", po::value<int64_t>(&f.decoding.max_new_tokens)->default_value(32),
      "new tokens per prompt, at most")("temperature,t",
                                        po::value<double>(&f.decoding.sampling.temperature)->default_value(0.0),
                                        "0: greedy; above 0: sample at this temperature")(
      "greedy", po::bool_switch(), "the most likely token every time (the default; the same as --temperature 0)")(
      "top-k", po::value<int64_t>(&f.decoding.sampling.top_k)->default_value(0),
      "sample among the k likeliest (0: all)")("top-p",
                                               po::value<double>(&f.decoding.sampling.top_p)->default_value(1.0),
                                               "sample within the nucleus of this probability (1: all)")(
      "seed", po::value<uint64_t>(&f.decoding.seed)->default_value(42), "sampling seed")(
      "eos-id", po::value<std::vector<int64_t>>(&f.eos)->composing(),
      "stop a sequence at this token (repeatable; default: the model's or tokenizer's end-of-text token)")(
      "ignore-eos", po::bool_switch(&f.ignore_eos), "never stop before --max-new-tokens")(
      "warmup", po::value<int64_t>(&f.warmup)->default_value(0),
      "generate this many times first, unmeasured and unprinted (benchmarks)")(
      "repeat", po::value<int64_t>(&f.repeat)->default_value(1),
      "the batch is the prompts this many times (benchmarks)")(
      "tp", po::value<int>(&f.tp)->default_value(0), "tensor-parallel size (default: every process of the launch)")(
      "device", po::value<std::string>(&f.device), "cpu, cuda or auto (default: auto, or the config's general.device)")(
      "dtype", po::value<std::string>(&f.dtype), "float32, bfloat16, float16 (default: the weights' dtype)")(
      "no-cache", po::bool_switch(&f.no_cache), "recompute the whole sequence for every token (a slow reference)")(
      "output,o", po::value<std::string>(&f.output), "also write the sequences as JSON lines to this file")(
      "cuda-graphs", po::value<std::string>(&f.cuda_graphs)->default_value("auto"),
      "auto (on for CUDA at tp 1), on or off: each decoding step as one CUDA graph")(
      "profile", po::value<std::string>(&f.decoding.profile_path),
      "write a Chrome trace (host and GPU) of 8 decoding steps, after the first 3, to this file")(
      "plugin-path", po::value<std::vector<std::string>>(&f.plugin_paths)->composing(),
      "extra folder searched for plugins");
  return options;
}

// What makes the command line unusable as a whole, or "" when it is fine.
std::string usage_problem(const GenerateOptions& f, bool greedy) {
  if (f.model.empty() == f.config.empty())
    return "give the model as MODEL (a checkpoint or Hugging Face folder) or --config FILE, one of them";
  if (f.prompts.empty() == f.prompt_ids.empty())
    return "give the prompts as --prompt TEXT or as --prompt-ids IDS (one kind, repeatable)";
  if (!f.sets.empty() && f.config.empty()) return "--set needs --config";
  if (greedy && f.decoding.sampling.temperature != 0.0)
    return "--greedy contradicts --temperature " + std::to_string(f.decoding.sampling.temperature);
  if (f.repeat < 1) return "--repeat: expected at least 1, got " + std::to_string(f.repeat);
  if (f.ignore_eos && !f.eos.empty()) return "--ignore-eos contradicts --eos-id";
  return "";
}

}  // namespace

Parsed<GenerateOptions> parse_generate_options(const std::vector<std::string>& args) {
  GenerateOptions f;
  const po::options_description options = generate_option_table(f);
  po::positional_options_description positional;
  positional.add("model", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(options).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "triax generate: " << e.what() << " (see triax generate --help)\n";
    return Parsed<GenerateOptions>::leave(kExitInvalidConfig);
  }
  if (vm.count("help")) {
    std::cout << "usage: triax generate MODEL (--prompt TEXT | --prompt-ids IDS)... [options]\n"
                 "       triax generate --config FILE [--set KEY=VALUE]... (--prompt TEXT | --prompt-ids IDS)...\n"
              << options;
    return Parsed<GenerateOptions>::leave(kExitOk);
  }
  if (const std::string problem = usage_problem(f, vm["greedy"].as<bool>()); !problem.empty()) {
    std::cerr << "triax generate: " << problem << " (see triax generate --help)\n";
    return Parsed<GenerateOptions>::leave(kExitInvalidConfig);
  }
  return f;
}

}  // namespace triax::cli
