// `triax train --config FILE [--set KEY=VALUE]... [--plugin-path DIR]...`
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <boost/program_options.hpp>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "commands.hpp"
#include "triax/core/communicator.hpp"
#include "triax/core/config.hpp"
#include "triax/core/log.hpp"
#include "triax/core/plugin_registry.hpp"
#include "triax/core/trainer.hpp"
#include "triax/error.hpp"

namespace triax::cli {
namespace po = boost::program_options;

namespace {

// One intra-op thread per core unless OMP_NUM_THREADS says otherwise (LibTorch's own default
// can be a single thread on small machines).
void configure_threads() {
  const char* requested = std::getenv("OMP_NUM_THREADS");
  int threads = requested != nullptr ? std::atoi(requested) : static_cast<int>(std::thread::hardware_concurrency());
  at::set_num_threads(std::max(1, threads));
}

}  // namespace

int run_train_command(const std::vector<std::string>& args) {
  po::options_description options("triax train options");
  options.add_options()("help,h", "show this help")("config,c", po::value<std::string>(),
                                                    "YAML config file (nanotron schema + triax keys)")(
      "set", po::value<std::vector<std::string>>()->composing(),
      "override a config value: --set optimizer.clip_grad=0.5 (repeatable; numeric parts index lists)")(
      "plugin-path", po::value<std::vector<std::string>>()->composing(), "extra folder searched for plugins");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(options).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "triax train: " << e.what() << "\n" << options;
    return kExitInvalidConfig;
  }
  if (vm.count("help")) {
    std::cout << options;
    return kExitOk;
  }
  if (!vm.count("config")) {
    std::cerr << "triax train: --config FILE is required\n" << options;
    return kExitInvalidConfig;
  }
  try {
    const auto overrides = vm.count("set") ? vm["set"].as<std::vector<std::string>>() : std::vector<std::string>{};
    TrainConfig config = load_train_config(vm["config"].as<std::string>(), overrides);
    log::configure(0, 1, log::parse_level(config.logging.log_level),
                   log::parse_level(config.logging.log_level_replica));
    configure_threads();

    PluginRegistry registry;
    std::vector<std::string> paths = config.plugins.paths;
    if (vm.count("plugin-path"))
      for (const auto& p : vm["plugin-path"].as<std::vector<std::string>>()) paths.push_back(p);
    registry.scan_search_paths(paths);
    for (const auto& refusal : registry.refusals())
      log::warning("plugin library refused: " + refusal.library_path + ": " + refusal.reason);

    SingleProcessCommunicator communicator;
    Trainer trainer(std::move(config), registry, communicator);
    trainer.train();
    return kExitOk;
  } catch (const ConfigError& e) {
    std::cerr << "triax train: invalid configuration: " << e.what() << "\n";
    return kExitInvalidConfig;
  } catch (const PluginError& e) {
    std::cerr << "triax train: " << e.what() << "\n";
    return kExitPluginError;
  } catch (const c10::Error& e) {
    std::cerr << "triax train: " << e.what_without_backtrace() << "\n";
    return kExitFailure;
  } catch (const std::exception& e) {
    std::cerr << "triax train: " << e.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace triax::cli
