// `triax generate MODEL --prompt TEXT | --prompt-ids IDS [options]`: continues prompts with a
// trained model, through the model plugin's inference cache (docs/generation.md). MODEL is a
// triax checkpoint (run folder or step folder) or a Hugging Face folder; `--config FILE` takes a
// training config's model instead (its init_method.path weights, or random ones for benchmarks).
// Under `triax launch -n N` (or mpirun, torchrun) the model runs tensor parallel over the N ranks.
#include <c10/util/Exception.h>

#include <boost/program_options.hpp>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "commands.hpp"
#include "generation_output.hpp"
#include "launch_status.hpp"
#include "triax/comm/communicator_factory.hpp"
#include "triax/comm/launch_environment.hpp"
#include "triax/core/comm/communicator.hpp"
#include "triax/core/device.hpp"
#include "triax/generate/generation_model.hpp"
#include "triax/generate/generator.hpp"
#include "triax/generate/text_tokenizer.hpp"
#include "triax/report/log.hpp"
#include "triax/error.hpp"

namespace triax::cli {
namespace po = boost::program_options;

namespace {

struct GenerateFlags {
  std::string model, config, tokenizer, device, dtype, output;
  std::vector<std::string> sets, prompts, prompt_ids, plugin_paths;
  std::vector<int64_t> eos;
  bool ignore_eos = false, no_cache = false;
  std::string cuda_graphs = "auto";
  int64_t repeat = 1;
  int64_t warmup = 0;
  int tp = 0;
  generation::GenerationOptions options;
};

// "1,2,3" or "1 2 3" -> ids; anything else names the flag.
std::vector<int64_t> parse_ids(const std::string& text) {
  std::string spaced = text;
  for (char& c : spaced)
    if (c == ',') c = ' ';
  std::istringstream in(spaced);
  std::vector<int64_t> ids;
  std::string word;
  while (in >> word) {
    size_t used = 0;
    long long id = 0;
    try {
      id = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size()) throw ConfigError("--prompt-ids: '" + word + "' in '" + text + "' is not a token id");
    ids.push_back(id);
  }
  if (ids.empty()) throw ConfigError("--prompt-ids: '" + text + "' holds no token id");
  return ids;
}

std::string joined(const std::vector<int64_t>& ids) {
  std::string out;
  for (int64_t id : ids) out += (out.empty() ? "" : ", ") + std::to_string(id);
  return out;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// The end-of-text ids, and where they come from: the flags, ids the model's files state, the
// tokenizer's end-of-text token, or the model_config's (a plugin default the data may not use).
std::vector<int64_t> choose_eos(const GenerateFlags& flags, const generation::GenerationModelSpec& spec,
                                const generation::TextTokenizer::Encoded* tokenizer, std::string& origin) {
  if (flags.ignore_eos) {
    origin = "--ignore-eos: none";
    return {};
  }
  if (!flags.eos.empty()) {
    origin = "--eos-id";
    return flags.eos;
  }
  if (spec.eos_stated || !tokenizer || tokenizer->eos.empty()) {
    origin = spec.eos.empty() ? "none known (give --eos-id)" : spec.eos_origin;
    return spec.eos;
  }
  origin = "the tokenizer's " + tokenizer->eos_token;
  return tokenizer->eos;
}

// --cuda-graphs: auto is on where graphs apply (CUDA, tp 1); on is refused elsewhere.
bool use_cuda_graphs(const std::string& mode, const c10::Device& device, int tp) {
  const bool apply = device.is_cuda() && tp == 1;
  if (mode == "auto") return apply;
  if (mode == "off") return false;
  if (mode != "on") throw ConfigError("--cuda-graphs: expected auto, on or off, got '" + mode + "'");
  if (!apply)
    throw ConfigError("--cuda-graphs on: decoding steps run as CUDA graphs on a CUDA device at tp 1, not on " +
                      device.str() + " at tp " + std::to_string(tp));
  return true;
}

int generate(const GenerateFlags& flags) {
  const LaunchEnvironment launch = LaunchEnvironment::from_process();
  log::configure(launch.rank, launch.world_size, log::Level::info, log::Level::warning);
  configure_threads();
  const bool text_prompts = !flags.prompts.empty();
  if (const std::string& trace = flags.options.profile_path; !trace.empty()) {
    const std::filesystem::path folder = std::filesystem::absolute(trace).parent_path();
    if (!std::filesystem::is_directory(folder))
      throw ConfigError("--profile " + trace + ": the folder " + folder.string() + " does not exist");
  }

  PluginRegistry registry;
  registry.scan_search_paths(flags.plugin_paths);
  generation::GenerationModelSpec spec;
  if (!flags.config.empty()) {
    std::vector<std::string> overrides = flags.sets;
    spec = generation::spec_from_config(registry, load_train_config(flags.config, overrides));
  } else {
    spec = generation::spec_from_folder(registry, flags.model);
  }

  // The tokenizer: needed for text prompts, used to show ids as text when there is one.
  std::optional<std::string> tokenizer_path =
      flags.tokenizer.empty() ? generation::find_tokenizer(spec) : std::optional<std::string>(flags.tokenizer);
  if (text_prompts && !tokenizer_path)
    throw ConfigError("--prompt gives text, but " + spec.origin + " comes with no tokenizer.json (looked for " +
                      joined(spec.tokenizer_candidates) +
                      "): give the tokenizer with --tokenizer FILE, or the prompt as token ids with --prompt-ids");
  std::optional<generation::TextTokenizer> tokenizer;
  std::optional<generation::TextTokenizer::Encoded> encoded;
  if (tokenizer_path) {
    tokenizer.emplace(*tokenizer_path);
    encoded = tokenizer->encode(flags.prompts);
  }
  std::vector<std::vector<int64_t>> prompts;
  if (text_prompts)
    prompts = encoded->ids;
  else
    for (const std::string& ids : flags.prompt_ids) prompts.push_back(parse_ids(ids));
  for (size_t i = 0; i < prompts.size(); ++i)
    if (prompts[i].empty())
      throw ConfigError("--prompt '" + flags.prompts[i] + "': the tokenizer " + *tokenizer_path + " gives no token");
  {
    std::vector<std::vector<int64_t>> repeated;
    for (int64_t r = 0; r < flags.repeat; ++r) repeated.insert(repeated.end(), prompts.begin(), prompts.end());
    prompts = std::move(repeated);
  }

  generation::GenerationOptions options = flags.options;
  options.use_cache = !flags.no_cache;
  const triax_model_vtable& vtable = registry.model(spec.plugin);
  options.vocab_size = ModelInstance::vocab_size(vtable, spec.plugin, spec.model_config_yaml);
  if (encoded && encoded->vocab_size > options.vocab_size)
    log::warning("the tokenizer " + *tokenizer_path + " has " + std::to_string(encoded->vocab_size) +
                 " tokens, the model " + std::to_string(options.vocab_size));
  std::string eos_origin;
  options.eos = choose_eos(flags, spec, encoded ? &*encoded : nullptr, eos_origin);

  // The mesh: tensor parallel over every rank of the launch.
  const int tp = flags.tp > 0 ? flags.tp : launch.world_size;
  if (tp != launch.world_size)
    throw ConfigError("--tp " + std::to_string(tp) + ": generation runs tensor parallel over every process, but " +
                      std::to_string(launch.world_size) + " were started (start " + std::to_string(tp) +
                      " with `triax launch -n " + std::to_string(tp) + " -- triax generate ...`)");
  const std::string device_name = flags.device.empty() ? spec.device : flags.device;
  CommSettings mesh;
  mesh.shape.tp = tp;
  mesh.device = device_name;
  if (const char* timeout = std::getenv(kCommTimeoutVariable); timeout && *timeout)
    mesh.timeout_seconds = std::atof(timeout);
  c10::Device device(c10::kCPU);
  try {
    device = resolve_device(device_name, launch.local_rank);
  } catch (const ConfigError& e) {
    if (flags.device.empty()) throw;
    throw ConfigError(std::string("--device ") + flags.device + ": " + e.what());
  }
  options.cuda_graphs = use_cuda_graphs(flags.cuda_graphs, device, tp);
  std::unique_ptr<Communicator> communicator = connect_communicator(mesh, launch);
  HostServices host(*communicator);

  const std::string dtype = flags.dtype.empty() ? spec.dtype : flags.dtype;
  std::unique_ptr<ModelInstance> model =
      generation::create_generation_model(registry, spec, *communicator, host, device, dtype);
  log::info("model " + spec.plugin + " from " + spec.origin + ": " + std::to_string(model->total_parameters()) +
            " parameters, " + dtype + " on " + device_display_name(device) +
            (tp > 1 ? ", tp " + std::to_string(tp) : "") + "; " +
            (options.sampling.greedy() ? std::string("greedy") : "sampling") + ", at most " +
            std::to_string(options.max_new_tokens) + " new tokens, stops at " +
            (options.eos.empty() ? std::string("no token") : "token " + joined(options.eos)) + " (" + eos_origin + ")" +
            (tokenizer ? "; tokenizer " + tokenizer->path() : "") +
            (options.cuda_graphs ? "; decoding steps as CUDA graphs" : ""));

  if (flags.warmup < 0) throw ConfigError("--warmup: expected 0 or more runs, got " + std::to_string(flags.warmup));
  generation::GenerationOptions unprofiled = options;
  unprofiled.profile_path.clear();
  for (int64_t run = 0; run < flags.warmup; ++run) generation::generate(*model, *communicator, device, prompts, unprofiled);
  GenerationReport report;
  report.result = generation::generate(*model, *communicator, device, prompts, options);
  report.prompts = prompts;
  if (launch.rank == 0) {
    if (tokenizer) {
      std::vector<std::vector<int64_t>> new_ids;
      for (const auto& s : report.result.sequences) new_ids.push_back(s.tokens);
      report.new_texts = tokenizer->decode(new_ids);
      report.prompt_texts = text_prompts && flags.repeat == 1 ? flags.prompts : tokenizer->decode(prompts);
    }
    print_generations(std::cout, report);
    if (!flags.output.empty()) write_generations_jsonl(flags.output, report);
    std::cerr << "triax generate: " << throughput_line(report.result.stats, prompts.size()) << "\n";
  }
  model.reset();
  communicator->barrier(TRIAX_GROUP_WORLD);
  return kExitOk;
}

}  // namespace

int run_generate_command(const std::vector<std::string>& args) {
  GenerateFlags f;
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
      "max-new-tokens,n", po::value<int64_t>(&f.options.max_new_tokens)->default_value(32),
      "new tokens per prompt, at most")("temperature,t",
                                        po::value<double>(&f.options.sampling.temperature)->default_value(0.0),
                                        "0: greedy; above 0: sample at this temperature")(
      "greedy", po::bool_switch(), "the most likely token every time (the default; the same as --temperature 0)")(
      "top-k", po::value<int64_t>(&f.options.sampling.top_k)->default_value(0),
      "sample among the k likeliest (0: all)")("top-p",
                                               po::value<double>(&f.options.sampling.top_p)->default_value(1.0),
                                               "sample within the nucleus of this probability (1: all)")(
      "seed", po::value<uint64_t>(&f.options.seed)->default_value(42), "sampling seed")(
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
      "profile", po::value<std::string>(&f.options.profile_path),
      "write a Chrome trace (host and GPU) of 8 decoding steps, after the first 3, to this file")(
      "plugin-path", po::value<std::vector<std::string>>(&f.plugin_paths)->composing(),
      "extra folder searched for plugins");
  po::positional_options_description positional;
  positional.add("model", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(options).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "triax generate: " << e.what() << " (see triax generate --help)\n";
    return kExitInvalidConfig;
  }
  if (vm.count("help")) {
    std::cout << "usage: triax generate MODEL (--prompt TEXT | --prompt-ids IDS)... [options]\n"
                 "       triax generate --config FILE [--set KEY=VALUE]... (--prompt TEXT | --prompt-ids IDS)...\n"
              << options;
    return kExitOk;
  }
  std::string usage;
  if (f.model.empty() == f.config.empty())
    usage = "give the model as MODEL (a checkpoint or Hugging Face folder) or --config FILE, one of them";
  else if (f.prompts.empty() == f.prompt_ids.empty())
    usage = "give the prompts as --prompt TEXT or as --prompt-ids IDS (one kind, repeatable)";
  else if (!f.sets.empty() && f.config.empty())
    usage = "--set needs --config";
  else if (vm["greedy"].as<bool>() && f.options.sampling.temperature != 0.0)
    usage = "--greedy contradicts --temperature " + std::to_string(f.options.sampling.temperature);
  else if (f.repeat < 1)
    usage = "--repeat: expected at least 1, got " + std::to_string(f.repeat);
  else if (f.ignore_eos && !f.eos.empty())
    usage = "--ignore-eos contradicts --eos-id";
  if (!usage.empty()) {
    std::cerr << "triax generate: " << usage << " (see triax generate --help)\n";
    return kExitInvalidConfig;
  }
  try {
    return generate(f);
  } catch (const CommunicationError& e) {
    std::cerr << "triax generate: communication failed: " << e.what() << "\n";
    exit_now(kExitCommunication);
  } catch (const ConfigError& e) {
    std::cerr << "triax generate: " << e.what() << "\n";
    return kExitInvalidConfig;
  } catch (const PluginError& e) {
    std::cerr << "triax generate: " << e.what() << "\n";
    return kExitPluginError;
  } catch (const Error& e) {
    std::cerr << "triax generate: " << e.what() << "\n";
    if (e.status() == TRIAX_ERROR_UNSUPPORTED) return kExitPluginError;
    return e.status() == TRIAX_ERROR_INVALID_ARGUMENT ? kExitInvalidConfig : kExitFailure;
  } catch (const c10::Error& e) {
    std::cerr << "triax generate: " << e.what_without_backtrace() << "\n";
    return kExitFailure;
  } catch (const std::exception& e) {
    std::cerr << "triax generate: " << e.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace triax::cli
