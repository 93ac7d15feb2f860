// `triax`: the command line. A small dispatcher; each subcommand lives in its own file.
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "launch_status.hpp"

namespace {

void print_usage(std::ostream& out) {
  out << "usage: triax <command> [options]\n\n"
         "commands:\n"
         "  train     train a model from a YAML config (triax train --config FILE [--set KEY=VALUE]...)\n"
         "  generate  text from a trained model (triax generate RUN_OR_HF_FOLDER --prompt TEXT | --prompt-ids 1,2,3)\n"
         "  launch    start N local ranks of a command (triax launch -n N -- triax train --config FILE)\n"
         "  inspect   print the process mesh (triax inspect mesh --dp D --tp T --pp P), check a checkpoint\n"
         "            (triax inspect checkpoint PATH) or simulate the pipeline schedules (triax inspect schedule)\n"
         "  convert   to and from Hugging Face (triax convert --to hf CKPT OUT, --from hf HF_DIR OUT)\n"
         "  plugins   list the plugins found and the libraries refused\n"
         "  config-reference  print every configuration key (docs/config-reference.md)\n"
         "  version   print the triax version\n\n"
         "`triax <command> --help` describes a command's options.\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(std::cerr);
    return triax::cli::kExitInvalidConfig;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "train") {
    return triax::cli::record_exit_status(triax::cli::run_train_command(args));  // for `triax launch`
  }
  if (command == "generate") {
    return triax::cli::record_exit_status(triax::cli::run_generate_command(args));  // for `triax launch`
  }
  if (command == "launch") return triax::cli::run_launch_command(args);
  if (command == "inspect") return triax::cli::run_inspect_command(args);
  if (command == "convert") return triax::cli::run_convert_command(args);
  if (command == "plugins") return triax::cli::run_plugins_command(args);
  if (command == "config-reference") return triax::cli::run_config_reference_command(args);
  if (command == "version" || command == "--version") {
    std::cout << "triax " << TRIAX_VERSION << "\n";
    return triax::cli::kExitOk;
  }
  if (command == "help" || command == "--help" || command == "-h") {
    print_usage(std::cout);
    return triax::cli::kExitOk;
  }
  std::cerr << "triax: unknown command '" << command << "'\n\n";
  print_usage(std::cerr);
  return triax::cli::kExitInvalidConfig;
}
