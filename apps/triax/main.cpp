// `triax`: the command line. A small dispatcher; each subcommand lives in its own file.
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"

namespace {

void print_usage(std::ostream& out) {
  out << "usage: triax <command> [options]\n\n"
         "commands:\n"
         "  train     train a model from a YAML config (triax train --config FILE [--set KEY=VALUE]...)\n"
         "  plugins   list the plugins found and the libraries refused\n"
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
  if (command == "train") return triax::cli::run_train_command(args);
  if (command == "plugins") return triax::cli::run_plugins_command(args);
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
