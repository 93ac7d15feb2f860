// `triax inspect checkpoint PATH`: what a checkpoint holds (step, topology, tensors and their
// sizes) and whether every stored dataset still matches its checksum; a broken one is named with
// its file. Exit status 0 when all is well, 1 when something is broken or unreadable.
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include "commands.hpp"
#include "parsed_options.hpp"
#include "triax/core/checkpoint/checkpoint_reader.hpp"
#include "triax/tensor_text.hpp"

namespace triax::cli {
namespace {

std::string megabytes(int64_t bytes) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << static_cast<double>(bytes) / 1e6 << " MB";
  return out.str();
}

// `triax inspect checkpoint`'s options.
struct CheckpointInspection {
  std::string path;
  bool list_datasets = false;  // --datasets
};

Parsed<CheckpointInspection> parse_inspection(const std::vector<std::string>& args) {
  const bool list_datasets = args.size() == 2 && args[1] == "--datasets";
  if ((args.size() != 1 && !list_datasets) || args[0] == "--help" || args[0] == "-h") {
    (args.size() == 1 ? std::cout : std::cerr)
        << "usage: triax inspect checkpoint PATH [--datasets]\n"
           "  PATH: a step folder, or a checkpoints folder whose 'latest' names one\n"
           "  --datasets: also list every rank file's datasets (which rank stores which piece)\n";
    return Parsed<CheckpointInspection>::leave(args.size() == 1 ? kExitOk : kExitInvalidConfig);
  }
  CheckpointInspection parsed;
  parsed.path = args[0];
  parsed.list_datasets = list_datasets;
  return parsed;
}

void print_contents(const checkpoint::CheckpointReader& reader) {
  const checkpoint::CheckpointMetadata& m = reader.metadata();
  std::cout << "checkpoint " << reader.folder().string() << "\n"
            << "  step " << m.step << ", " << m.consumed_tokens << " tokens consumed, saved " << m.saved_at
            << " by triax " << m.triax_version << " (LibTorch " << m.torch_version << ")\n"
            << "  topology: " << m.topology.describe() << " (" << m.files.size() << " files)\n"
            << "  model: " << m.model_plugin << " (" << m.model_dtype << "); optimizer: " << m.optimizer_plugin
            << (m.has_optimizer_state ? " (state saved)" : " (no state saved)") << "\n";
  std::cout << "  tensors:\n";
  for (const std::string& name : reader.parameter_names())
    std::cout << "    " << std::left << std::setw(48) << name << " " << std::setw(16)
              << shape_text(reader.parameter_shape(name)) << " " << reader.parameter_dtype(name) << "\n";
}

// Every dataset against its checksum; the status says whether all matched.
int verify_checksums(checkpoint::CheckpointReader& reader, bool list_datasets) {
  int64_t bytes = 0, broken = 0;
  std::map<std::string, int64_t> per_file;
  const auto checks = reader.verify();
  for (const auto& check : checks) {
    bytes += check.bytes;
    per_file[check.file] += check.bytes;
    if (list_datasets)
      std::cout << "  dataset " << check.file << " " << check.dataset << " " << shape_text(check.shape) << "\n";
    if (!check.problem.empty()) {
      ++broken;
      std::cout << "  BROKEN: " << check.problem << "\n";
    }
  }
  for (const auto& [file, file_bytes] : per_file) std::cout << "  " << file << ": " << megabytes(file_bytes) << "\n";
  if (broken > 0) {
    std::cout << "  checksums: " << broken << " of " << checks.size() << " datasets broken\n";
    return kExitFailure;
  }
  std::cout << "  checksums: all " << checks.size() << " datasets verified (" << megabytes(bytes) << ")\n";
  return kExitOk;
}

int inspect_folder(const CheckpointInspection& inspection) {
  try {
    checkpoint::CheckpointReader reader(inspection.path);
    print_contents(reader);
    return verify_checksums(reader, inspection.list_datasets);
  } catch (const std::exception& e) {
    std::cerr << "triax inspect checkpoint: " << e.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace

int inspect_checkpoint(const std::vector<std::string>& args) {
  return run_parsed(parse_inspection(args), inspect_folder);
}

}  // namespace triax::cli
