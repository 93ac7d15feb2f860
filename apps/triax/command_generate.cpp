// `triax generate MODEL --prompt TEXT | --prompt-ids IDS [options]`: continues prompts with a
// trained model, through the model plugin's inference cache (docs/generation.md). MODEL is a
// triax checkpoint (run folder or step folder) or a Hugging Face folder; `--config FILE` takes a
// training config's model instead (its init_method.path weights, or random ones for benchmarks).
// Under `triax launch -n N` (or mpirun, torchrun) the model runs tensor parallel over the N ranks.
#include <c10/util/Exception.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "commands.hpp"
#include "generate_options.hpp"
#include "generation_output.hpp"
#include "launch_status.hpp"
#include "triax/comm/communicator_factory.hpp"
#include "triax/comm/launch_environment.hpp"
#include "triax/core/comm/communicator.hpp"
#include "triax/device/device.hpp"
#include "triax/error.hpp"
#include "triax/generate/generation_model.hpp"
#include "triax/generate/generator.hpp"
#include "triax/generate/text_tokenizer.hpp"
#include "triax/report/log.hpp"

namespace triax::cli {
namespace {

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
std::vector<int64_t> choose_eos(const GenerateOptions& flags, const generation::GenerationModelSpec& spec,
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

void check_profile_folder(const std::string& trace) {
  if (trace.empty()) return;
  const std::filesystem::path folder = std::filesystem::absolute(trace).parent_path();
  if (!std::filesystem::is_directory(folder))
    throw ConfigError("--profile " + trace + ": the folder " + folder.string() + " does not exist");
}

generation::GenerationModelSpec model_spec(const PluginRegistry& registry, const GenerateOptions& flags) {
  if (flags.config.empty()) return generation::spec_from_folder(registry, flags.model);
  return generation::spec_from_config(registry, load_train_config(flags.config, flags.sets));
}

// The prompts as token ids, and the tokenizer: needed for text prompts, used to show ids as text
// when there is one.
struct PromptBatch {
  std::optional<std::string> tokenizer_path;
  std::optional<generation::TextTokenizer> tokenizer;
  std::optional<generation::TextTokenizer::Encoded> encoded;
  std::vector<std::vector<int64_t>> ids;  // the prompts, --repeat times over
};

PromptBatch read_prompts(const GenerateOptions& flags, const generation::GenerationModelSpec& spec) {
  const bool text_prompts = !flags.prompts.empty();
  PromptBatch batch;
  batch.tokenizer_path =
      flags.tokenizer.empty() ? generation::find_tokenizer(spec) : std::optional<std::string>(flags.tokenizer);
  if (text_prompts && !batch.tokenizer_path)
    throw ConfigError("--prompt gives text, but " + spec.origin + " comes with no tokenizer.json (looked for " +
                      joined(spec.tokenizer_candidates) +
                      "): give the tokenizer with --tokenizer FILE, or the prompt as token ids with --prompt-ids");
  if (batch.tokenizer_path) {
    batch.tokenizer.emplace(*batch.tokenizer_path);
    batch.encoded = batch.tokenizer->encode(flags.prompts);
  }
  std::vector<std::vector<int64_t>> prompts;
  if (text_prompts)
    prompts = batch.encoded->ids;
  else
    for (const std::string& ids : flags.prompt_ids) prompts.push_back(parse_ids(ids));
  for (size_t i = 0; i < prompts.size(); ++i)
    if (prompts[i].empty())
      throw ConfigError("--prompt '" + flags.prompts[i] + "': the tokenizer " + *batch.tokenizer_path +
                        " gives no token");
  for (int64_t r = 0; r < flags.repeat; ++r) batch.ids.insert(batch.ids.end(), prompts.begin(), prompts.end());
  return batch;
}

// What a generation works with, gathered step by step before the model is made.
struct GenerationSetup {
  generation::GenerationModelSpec spec;
  PromptBatch prompts;
  generation::GenerationOptions options;
  std::string eos_origin;
  int tp = 1;
  c10::Device device = c10::Device(c10::kCPU);
};

// The decoding options but cuda_graphs, which waits for the device.
void choose_decoding(const GenerateOptions& flags, const PluginRegistry& registry, GenerationSetup& setup) {
  const generation::GenerationModelSpec& spec = setup.spec;
  generation::GenerationOptions& options = setup.options;
  options = flags.decoding;
  options.use_cache = !flags.no_cache;
  const triax_model_vtable& vtable = registry.model(spec.plugin);
  options.vocab_size = ModelInstance::vocab_size(vtable, spec.plugin, spec.model_config_yaml);
  const auto& encoded = setup.prompts.encoded;
  if (encoded && encoded->vocab_size > options.vocab_size)
    log::warning("the tokenizer " + *setup.prompts.tokenizer_path + " has " + std::to_string(encoded->vocab_size) +
                 " tokens, the model " + std::to_string(options.vocab_size));
  options.eos = choose_eos(flags, spec, encoded ? &*encoded : nullptr, setup.eos_origin);
}

// The mesh: tensor parallel over every rank of the launch.
int tensor_parallel_size(const GenerateOptions& flags, const LaunchEnvironment& launch) {
  const int tp = flags.tp > 0 ? flags.tp : launch.world_size;
  if (tp != launch.world_size)
    throw ConfigError("--tp " + std::to_string(tp) + ": generation runs tensor parallel over every process, but " +
                      std::to_string(launch.world_size) + " were started (start " + std::to_string(tp) +
                      " with `triax launch -n " + std::to_string(tp) + " -- triax generate ...`)");
  return tp;
}

std::string device_name(const GenerateOptions& flags, const generation::GenerationModelSpec& spec) {
  return flags.device.empty() ? spec.device : flags.device;
}

c10::Device generation_device(const GenerateOptions& flags, const generation::GenerationModelSpec& spec,
                              int gpu_index) {
  try {
    return resolve_device(device_name(flags, spec), gpu_index);
  } catch (const ConfigError& e) {
    if (flags.device.empty()) throw;
    throw ConfigError(std::string("--device ") + flags.device + ": " + e.what());
  }
}

CommSettings generation_mesh(const GenerateOptions& flags, const GenerationSetup& setup) {
  CommSettings mesh;
  mesh.shape.tp = setup.tp;
  mesh.device = device_name(flags, setup.spec);
  if (const char* timeout = std::getenv(kCommTimeoutVariable); timeout && *timeout)
    mesh.timeout_seconds = std::atof(timeout);
  return mesh;
}

std::string model_line(const GenerationSetup& setup, const ModelInstance& model, const std::string& dtype) {
  const generation::GenerationOptions& options = setup.options;
  const auto& tokenizer = setup.prompts.tokenizer;
  return "model " + setup.spec.plugin + " from " + setup.spec.origin + ": " + std::to_string(model.total_parameters()) +
         " parameters, " + dtype + " on " + device_display_name(setup.device) +
         (setup.tp > 1 ? ", tp " + std::to_string(setup.tp) : "") + "; " +
         (options.sampling.greedy() ? std::string("greedy") : "sampling") + ", at most " +
         std::to_string(options.max_new_tokens) + " new tokens, stops at " +
         (options.eos.empty() ? std::string("no token") : "token " + joined(options.eos)) + " (" + setup.eos_origin +
         ")" + (tokenizer ? "; tokenizer " + tokenizer->path() : "") +
         (options.cuda_graphs ? "; decoding steps as CUDA graphs" : "");
}

// On the logging rank: the sequences on stdout (and --output), the throughput on stderr.
void show(const GenerateOptions& flags, const PromptBatch& prompts, GenerationReport& report) {
  if (prompts.tokenizer) {
    std::vector<std::vector<int64_t>> new_ids;
    for (const auto& s : report.result.sequences) new_ids.push_back(s.tokens);
    report.new_texts = prompts.tokenizer->decode(new_ids);
    const bool as_given = !flags.prompts.empty() && flags.repeat == 1;
    report.prompt_texts = as_given ? flags.prompts : prompts.tokenizer->decode(prompts.ids);
  }
  print_generations(std::cout, report);
  if (!flags.output.empty()) write_generations_jsonl(flags.output, report);
  std::cerr << "triax generate: " << throughput_line(report.result.stats, prompts.ids.size()) << "\n";
}

void generate_and_show(const GenerateOptions& flags, const GenerationSetup& setup, ModelInstance& model,
                       Communicator& communicator, int rank) {
  if (flags.warmup < 0) throw ConfigError("--warmup: expected 0 or more runs, got " + std::to_string(flags.warmup));
  const std::vector<std::vector<int64_t>>& prompts = setup.prompts.ids;
  generation::GenerationOptions unprofiled = setup.options;
  unprofiled.profile_path.clear();
  for (int64_t run = 0; run < flags.warmup; ++run)
    generation::generate(model, communicator, setup.device, prompts, unprofiled);
  GenerationReport report;
  report.result = generation::generate(model, communicator, setup.device, prompts, setup.options);
  report.prompts = prompts;
  if (rank == 0) show(flags, setup.prompts, report);
}

int generate(const GenerateOptions& flags) {
  const LaunchEnvironment launch = LaunchEnvironment::from_process();
  log::configure(launch.rank, launch.world_size, log::Level::info, log::Level::warning);
  configure_threads();
  check_profile_folder(flags.decoding.profile_path);
  PluginRegistry registry;
  registry.scan_search_paths(flags.plugin_paths);
  GenerationSetup setup;
  setup.spec = model_spec(registry, flags);
  setup.prompts = read_prompts(flags, setup.spec);
  choose_decoding(flags, registry, setup);
  setup.tp = tensor_parallel_size(flags, launch);
  setup.device = generation_device(flags, setup.spec, launch.local_rank);
  setup.options.cuda_graphs = use_cuda_graphs(flags.cuda_graphs, setup.device, setup.tp);
  std::unique_ptr<Communicator> communicator = connect_communicator(generation_mesh(flags, setup), launch);
  HostServices host(*communicator);

  const std::string dtype = flags.dtype.empty() ? setup.spec.dtype : flags.dtype;
  std::unique_ptr<ModelInstance> model =
      generation::create_generation_model(registry, setup.spec, *communicator, host, setup.device, dtype);
  log::info(model_line(setup, *model, dtype));
  generate_and_show(flags, setup, *model, *communicator, launch.rank);
  model.reset();
  communicator->barrier(TRIAX_GROUP_WORLD);
  return kExitOk;
}

// Runs the options, turning each kind of error into its message and exit status.
int run_generate(const GenerateOptions& flags) {
  try {
    return generate(flags);
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

}  // namespace

int run_generate_command(const std::vector<std::string>& args) {
  return run_parsed(parse_generate_options(args), run_generate);
}

}  // namespace triax::cli
