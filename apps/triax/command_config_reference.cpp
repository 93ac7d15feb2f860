// `triax config-reference [--check FILE]`: prints docs/config-reference.md, generated from the
// loader's reference (config_reference/config_reference.hpp); --check compares FILE with it and checks
// the reference against the loader, naming every key where they disagree.
#include <boost/program_options.hpp>
#include <exception>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "config_reference/config_reference.hpp"
#include "parsed_options.hpp"

namespace triax::cli {
namespace {

namespace po = boost::program_options;

// The first line where `file_text` and `generated` differ (1-based), or 0 when they are equal.
size_t first_difference(const std::string& file_text, const std::string& generated) {
  std::istringstream a(file_text), b(generated);
  std::string line_a, line_b;
  for (size_t line = 1;; ++line) {
    const bool more_a = static_cast<bool>(std::getline(a, line_a));
    const bool more_b = static_cast<bool>(std::getline(b, line_b));
    if (!more_a && !more_b) return file_text == generated ? 0 : line;
    if (more_a != more_b || line_a != line_b) return line;
  }
}

int check(const std::string& file) {
  const config_reference::Reference& reference = config_reference::reference();
  int status = kExitOk;
  for (const std::string& problem : config_reference::find_reference_drift(reference)) {
    std::cerr << problem << '\n';
    status = kExitFailure;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::cerr << "triax config-reference: cannot read " << file << '\n';
    return kExitFailure;
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (const size_t line = first_difference(text.str(), config_reference::render_markdown(reference))) {
    std::cerr << file << ": line " << line << " differs from the reference the loader carries; regenerate it with "
              << "`triax config-reference > " << file << "`\n";
    status = kExitFailure;
  }
  return status;
}

// `triax config-reference`'s options: print the reference, or check a file against it.
struct ConfigReferenceOptions {
  std::optional<std::string> check_file;
};

Parsed<ConfigReferenceOptions> parse_config_reference_options(const std::vector<std::string>& args) {
  po::options_description options(
      "triax config-reference [--check FILE]\n\n"
      "Prints the configuration reference (docs/config-reference.md) of this triax:\n"
      "every key the loader reads, its type, default, origin and meaning.\n\nOptions");
  std::string file;
  options.add_options()("help,h", "show this help")(
      "check", po::value<std::string>(&file),
      "compare FILE with the reference, and the reference with the loader; exit 1 naming each difference");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(options).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "triax config-reference: " << e.what() << "\n\n" << options << '\n';
    return Parsed<ConfigReferenceOptions>::leave(kExitInvalidConfig);
  }
  if (vm.count("help") != 0) {
    std::cout << options << '\n';
    return Parsed<ConfigReferenceOptions>::leave(kExitOk);
  }
  ConfigReferenceOptions parsed;
  if (vm.count("check") != 0) parsed.check_file = file;
  return parsed;
}

int print_or_check(const ConfigReferenceOptions& options) {
  try {
    if (options.check_file) return check(*options.check_file);
    std::cout << config_reference::render_markdown(config_reference::reference());
  } catch (const std::exception& e) {
    std::cerr << "triax config-reference: " << e.what() << '\n';
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace

int run_config_reference_command(const std::vector<std::string>& args) {
  return run_parsed(parse_config_reference_options(args), print_or_check);
}

}  // namespace triax::cli
