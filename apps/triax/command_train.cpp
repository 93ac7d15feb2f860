// `triax train --config FILE [--set KEY=VALUE]... [--plugin-path DIR]...`
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <boost/program_options.hpp>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <thread>

#include "commands.hpp"
#include "launch_status.hpp"
#include "parsed_options.hpp"
#include "run_check.hpp"
#include "triax/comm/communicator_factory.hpp"
#include "triax/comm/launch_environment.hpp"
#include "triax/checkpoint_async/save_strategies.hpp"
#include "triax/convert/hf_model_format.hpp"
#include "triax/core/comm/communicator.hpp"
#include "triax/config/train_config.hpp"
#include "triax/core/plugins/plugin_registry.hpp"
#include "triax/core/trainer.hpp"
#include "triax/error.hpp"
#include "triax/report/log.hpp"

namespace triax::cli {
namespace po = boost::program_options;

void configure_threads() {
  const char* requested = std::getenv("OMP_NUM_THREADS");
  int threads = requested != nullptr ? std::atoi(requested) : static_cast<int>(std::thread::hardware_concurrency());
  at::set_num_threads(std::max(1, threads));
}

namespace {

std::string seconds_text(double seconds) {
  std::ostringstream text;
  text << seconds << " s";
  return text.str();
}

// torchrun starts ranks for NCCL only (the mpi backend needs mpirun's or srun's ranks): say so
// in one line before any work rather than after the plugins and the mesh are set up.
void refuse_torchrun_without_gpu(const TrainConfig& config, const LaunchEnvironment& launch) {
  if (launch.launcher != LaunchEnvironment::Launcher::torchrun) return;
  const std::string& device = config.general.device;
  if (device == "cuda" || (device == "auto" && at::hasCUDA())) return;
  throw ConfigError("torchrun starts GPU ranks (nccl); on CPU start them with `triax launch -n " +
                    std::to_string(launch.world_size) + " -- triax train --config " + config.origin +
                    " ...` or mpirun (general.device is " + device + (at::hasCUDA() ? "" : ", no GPU found") + ")");
}

// The launcher's variable that holds the number of ranks, for messages.
const char* world_size_variable(const LaunchEnvironment& launch) {
  switch (launch.launcher) {
    case LaunchEnvironment::Launcher::slurm:
      return "SLURM_NTASKS";
    case LaunchEnvironment::Launcher::mpirun:
      return "OMPI_COMM_WORLD_SIZE";
    default:
      return "WORLD_SIZE";
  }
}

// Leaves after the error that ended the run, with the status of docs/architecture.md. The peers
// hear of it first through the liveness store (they would otherwise wait out the timeout); a rank
// of a multi-process run then leaves at once: MPI_Finalize could wait for peers that are gone.
int leave_after(const std::exception& error, Communicator* communicator) {
  int status = kExitFailure;
  std::string reason = error.what(), kind;
  if (dynamic_cast<const CommunicationError*>(&error) != nullptr || (communicator && communicator->failed())) {
    status = kExitCommunication;  // also when a plugin turned the communicator's error into its own
    kind = "communication failed: ";
  } else if (dynamic_cast<const ConfigError*>(&error) != nullptr) {
    status = kExitInvalidConfig;
    kind = "invalid configuration: ";
  } else if (dynamic_cast<const PluginError*>(&error) != nullptr) {
    status = kExitPluginError;
  } else if (const auto* c10_error = dynamic_cast<const c10::Error*>(&error)) {
    reason = c10_error->what_without_backtrace();
  }
  std::cerr << "triax train: " + kind + reason + "\n";  // one write: ranks share the terminal
  const bool alone = communicator == nullptr || communicator->size(TRIAX_GROUP_WORLD) == 1;
  if (alone && status != kExitCommunication) return status;
  if (communicator) communicator->report_failure(reason);
  exit_now(status);
}

// The options of `triax train`, as given.
struct TrainOptions {
  std::string config_file;
  std::vector<std::string> sets;          // --set KEY=VALUE, in order
  std::vector<std::string> plugin_paths;  // --plugin-path, after the config's plugins.paths
  bool print_run_folder = false;
  bool check = false;
};

po::options_description train_option_table() {
  po::options_description options("triax train options");
  options.add_options()("help,h", "show this help")("config,c", po::value<std::string>(),
                                                    "YAML config file (nanotron schema + triax keys)")(
      "config-file", po::value<std::string>(), "the same as --config (nanotron's run_train.py flag)")(
      "set", po::value<std::vector<std::string>>()->composing(),
      "override a config value: --set optimizer.clip_grad=0.5 (repeatable; numeric parts index lists)")(
      "plugin-path", po::value<std::vector<std::string>>()->composing(), "extra folder searched for plugins")(
      "print-run-folder", "print the run folder the config names (checkpoints.checkpoints_path) and exit")(
      "check", "check the config and the plugins' sections, as a run does before any work, and exit");
  return options;
}

std::vector<std::string> strings_of(const po::variables_map& vm, const char* name) {
  return vm.count(name) ? vm[name].as<std::vector<std::string>>() : std::vector<std::string>{};
}

Parsed<TrainOptions> parse_train_options(const std::vector<std::string>& args) {
  const po::options_description options = train_option_table();
  po::variables_map vm;
  try {
    po::positional_options_description positional;  // `triax train FILE` means `--config FILE`
    positional.add("config", 1);
    po::store(po::command_line_parser(args).options(options).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "triax train: " << e.what() << "\n" << options;
    return Parsed<TrainOptions>::leave(kExitInvalidConfig);
  }
  if (vm.count("help")) {
    std::cout << options;
    return Parsed<TrainOptions>::leave(kExitOk);
  }
  if (vm.count("config") && vm.count("config-file")) {
    std::cerr << "triax train: give the config once, with --config or --config-file\n";
    return Parsed<TrainOptions>::leave(kExitInvalidConfig);
  }
  if (!vm.count("config") && !vm.count("config-file")) {
    std::cerr << "triax train: --config FILE is required\n" << options;
    return Parsed<TrainOptions>::leave(kExitInvalidConfig);
  }
  TrainOptions parsed;
  parsed.config_file = vm[vm.count("config") ? "config" : "config-file"].as<std::string>();
  parsed.sets = strings_of(vm, "set");
  parsed.plugin_paths = strings_of(vm, "plugin-path");
  parsed.print_run_folder = vm.count("print-run-folder") > 0;
  parsed.check = vm.count("check") > 0;
  return parsed;
}

// `triax launch --comm-timeout S` passes its timeout down; an explicit --set still wins.
std::vector<std::string> config_overrides(const TrainOptions& options) {
  std::vector<std::string> overrides;
  if (const char* timeout = std::getenv(kCommTimeoutVariable); timeout && *timeout)
    overrides.push_back(std::string("parallelism.comm_timeout_seconds=") + timeout);
  overrides.insert(overrides.end(), options.sets.begin(), options.sets.end());
  return overrides;
}

// --check: the config and the plugins' sections, as a run checks them before any work.
int check_only(const TrainOptions& options, TrainConfig& config, PluginRegistry& registry,
               const std::vector<std::string>& plugin_paths) {
  registry.scan_search_paths(plugin_paths);
  check_run(config, registry);
  std::cout << options.config_file << ": the configuration is valid (model " << config.model.plugin << ", engine "
            << config.parallelism.pp_engine << ", optimizer " << config.optimizer.plugin << ")\n";
  return kExitOk;
}

// Every rank checks the mesh against the launch before any work, so a mismatch is reported by
// all of them and none waits for the others.
void check_world(const TrainConfig& config, const LaunchEnvironment& launch) {
  try {
    validate_for_world(config, launch.world_size);
  } catch (const ConfigError& e) {
    if (launch.launcher != LaunchEnvironment::Launcher::none)
      throw ConfigError(std::string(e.what()) + "; the world size comes from " + launch.launcher_name() + " (" +
                        world_size_variable(launch) + "=" + std::to_string(launch.world_size) +
                        "): start as many ranks as the config's mesh, or change parallelism");
    throw ConfigError(std::string(e.what()) + "; start the ranks with `triax launch -n " +
                      std::to_string(config.parallelism.dp * config.parallelism.tp * config.parallelism.pp *
                                     config.parallelism.context_parallel_size) +
                      " -- triax train ...`, mpirun, srun or torchrun");
  }
}

// This rank's process before any work: the launcher's refusal, the log, the mesh, the threads.
void prepare_rank(const TrainConfig& config, const LaunchEnvironment& launch) {
  refuse_torchrun_without_gpu(config, launch);
  log::configure(launch.rank, launch.world_size, log::parse_level(config.logging.log_level),
                 log::parse_level(config.logging.log_level_replica));
  check_world(config, launch);
  configure_threads();
}

void scan_plugins(PluginRegistry& registry, const std::vector<std::string>& plugin_paths) {
  registry.scan_search_paths(plugin_paths);
  for (const auto& refusal : registry.refusals())
    log::warning("plugin library refused: " + refusal.library_path + ": " + refusal.reason);
}

void log_connection(const TrainConfig& config, const LaunchEnvironment& launch, const Communicator& communicator) {
  if (launch.world_size > 1)
    log::info(std::string("communication: ") + communicator.backend_name() + " backend, " +
              std::to_string(launch.world_size) + " ranks started by " + launch.launcher_name() + ", timeout " +
              seconds_text(config.parallelism.comm_timeout_seconds));
}

void train(TrainConfig config, PluginRegistry& registry, Communicator& communicator, const LaunchEnvironment& launch) {
  const HfModelFormat hf_folders;  // model.init_method.path may name a Hugging Face folder
  const checkpoint::RegisteredSaveStrategies save_strategies;  // checkpoints.async_save
  Trainer trainer(std::move(config), registry, communicator, &hf_folders, &save_strategies);
  const TrainSummary summary = trainer.train();
  if (!summary.preempted_by.empty() && launch.rank == 0)
    std::cout << "triax train: preempted by " << summary.preempted_by
              << ": every rank stopped at a step boundary and saved a checkpoint; exiting 0\n";
}

int run_train(const TrainOptions& options) {
  std::unique_ptr<Communicator> communicator;
  try {
    TrainConfig config = load_train_config(options.config_file, config_overrides(options));
    if (options.print_run_folder) {
      std::cout << config.run_dir() << "\n";
      return kExitOk;
    }
    PluginRegistry registry;
    std::vector<std::string> plugin_paths = config.plugins.paths;
    plugin_paths.insert(plugin_paths.end(), options.plugin_paths.begin(), options.plugin_paths.end());
    if (options.check) return check_only(options, config, registry, plugin_paths);
    const LaunchEnvironment launch = LaunchEnvironment::from_process();
    prepare_rank(config, launch);
    scan_plugins(registry, plugin_paths);
    communicator = connect_communicator(comm_settings(config), launch);
    log_connection(config, launch, *communicator);
    train(std::move(config), registry, *communicator, launch);
    // A run succeeds only when every rank finished: a rank that died late fails the others here.
    communicator->barrier(TRIAX_GROUP_WORLD);
    return kExitOk;
  } catch (const std::exception& e) {
    return leave_after(e, communicator.get());
  }
}

}  // namespace

int run_train_command(const std::vector<std::string>& args) { return run_parsed(parse_train_options(args), run_train); }

}  // namespace triax::cli
