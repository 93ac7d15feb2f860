// What parsing a command's arguments gives: the plain options its run takes, or the exit status
// to leave with at once (after --help, or after a usage error that parsing already reported).
// Each command is a parse (arguments -> options) and a run (options -> work).
#pragma once

#include <optional>
#include <utility>

#include "commands.hpp"

namespace triax::cli {

template <typename Options>
struct Parsed {
  std::optional<Options> options;  // empty: leave with exit_status
  int exit_status = kExitOk;

  // Implicit, so that a parse ends with `return options;`.
  Parsed(Options parsed) : options(std::move(parsed)) {}
  static Parsed leave(int status) {
    Parsed parsed;
    parsed.exit_status = status;
    return parsed;
  }

 private:
  Parsed() = default;
};

// Runs `run` on the parsed options, or returns the status parsing ended with.
template <typename Options, typename Run>
int run_parsed(const Parsed<Options>& parsed, Run run) {
  return parsed.options ? run(*parsed.options) : parsed.exit_status;
}

}  // namespace triax::cli
