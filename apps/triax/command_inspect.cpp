// `triax inspect mesh --dp D --tp T --pp P [--ep E] [--cp C]`: the rank table and every process group, as
// ParallelContext computes them (no process is started). `triax inspect checkpoint PATH`: see
// inspect_checkpoint.cpp; `triax inspect schedule`: inspect_schedule.cpp.
#include <boost/program_options.hpp>
#include <iostream>

#include "commands.hpp"
#include "parsed_options.hpp"
#include "triax/core/comm/parallel_context.hpp"
#include "triax/error.hpp"

namespace triax::cli {
namespace po = boost::program_options;

namespace {

po::options_description mesh_option_table(MeshShape& shape) {
  po::options_description options("triax inspect mesh options");
  options.add_options()("help,h", "show this help")("dp", po::value<int>(&shape.dp)->default_value(1),
                                                    "data-parallel size")(
      "tp", po::value<int>(&shape.tp)->default_value(1), "tensor-parallel size")(
      "pp", po::value<int>(&shape.pp)->default_value(1), "pipeline-parallel size")(
      "ep", po::value<int>(&shape.ep)->default_value(1), "expert-parallel size (divides dp)")(
      "cp", po::value<int>(&shape.cp)->default_value(1), "context-parallel size (parallelism.context_parallel_size)");
  return options;
}

// `triax inspect mesh`'s options (what follows "mesh"): the mesh's shape.
Parsed<MeshShape> parse_mesh_options(const std::vector<std::string>& args) {
  MeshShape shape;
  const po::options_description options = mesh_option_table(shape);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(options).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "triax inspect mesh: " << e.what() << "\n" << options;
    return Parsed<MeshShape>::leave(kExitInvalidConfig);
  }
  if (vm.count("help")) {
    std::cout << options;
    return Parsed<MeshShape>::leave(kExitOk);
  }
  return shape;
}

int inspect_mesh(const MeshShape& shape) {
  try {
    shape.validate();
    std::cout << ParallelContext::describe(shape);
    return kExitOk;
  } catch (const ConfigError& e) {
    std::cerr << "triax inspect mesh: " << e.what() << "\n";
    return kExitInvalidConfig;
  }
}

}  // namespace

int run_inspect_command(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "checkpoint")
    return inspect_checkpoint(std::vector<std::string>(args.begin() + 1, args.end()));
  if (!args.empty() && args[0] == "schedule")
    return inspect_schedule_command(std::vector<std::string>(args.begin() + 1, args.end()));
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h" || args[0] == "help")) {
    std::cout << "usage: triax inspect mesh --dp D --tp T --pp P [--ep E] [--cp C]   the rank table and every process group\n"
                 "       triax inspect checkpoint PATH                               step, topology, tensors, checksums\n"
                 "       triax inspect schedule [--pp P] [--micro-batches M] [--forward F ...] [--measure CONFIG]\n"
                 "                                    every pipeline engine's simulated step, bubble, activations\n"
                 "`triax inspect mesh --help` lists the mesh options.\n";
    return kExitOk;
  }
  if (args.empty() || args[0] != "mesh") {
    std::cerr << "triax inspect: expected a subject: triax inspect mesh --dp D --tp T --pp P [--ep E] [--cp C], "
                 "triax inspect checkpoint PATH, or triax inspect schedule\n";
    return kExitInvalidConfig;
  }
  return run_parsed(parse_mesh_options(std::vector<std::string>(args.begin() + 1, args.end())), inspect_mesh);
}

}  // namespace triax::cli
