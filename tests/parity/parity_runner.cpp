// Loss and parameter parity of a parallel run against the single-rank run.
//
//   parity_runner run --config FILE --out DIR [--set KEY=VALUE]...
//       trains (under mpirun for more than one rank) and writes DIR/losses.txt,
//       DIR/grad_norms.txt and, when the run validates, DIR/val_losses.txt ("step loss" per
//       validation) (rank 0); DIR/peak_live.rank<R>.txt, DIR/held_bytes.rank<R>.txt (CPU bytes
//       that building the run left allocated) and DIR/parameters.rank<R>.bin: every
//       parameter shard this rank holds (a ZeRO-3 shard gathered into its tensor-parallel
//       shard), with its global shape and offset, in float64.
//   parity_runner compare --reference DIR --candidate DIR [--tolerance T] [--from-step K]
//       [--losses-only 1]
//       every step's loss and gradient norm within T relative (with --from-step, the candidate
//       resumed after step K and its values are those of the reference's steps K+1...); when the
//       reference validated, every validation after step K at the same step within T; every
//       shard of every rank within T of the same slice of the reference parameter
//       (max |a - b| <= T * max |b| over the tensor); every element of every reference parameter
//       covered by some shard.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../live_cpu_bytes.hpp"
#include "triax/parallel/zero3_pieces.hpp"
#include "triax/checkpoint_async/save_strategies.hpp"
#include "triax/comm/communicator_factory.hpp"
#include "triax/core/comm/communicator.hpp"
#include "triax/config/train_config.hpp"
#include "triax/report/log.hpp"
#include "triax/core/plugins/plugin_registry.hpp"
#include "triax/core/trainer.hpp"
#include "triax/error.hpp"

namespace triax {
namespace {

namespace fs = std::filesystem;

struct Shard {
  std::string name;
  std::vector<int64_t> global_shape, offset;
  at::Tensor data;  // float64
};

void write_shards(const std::vector<NamedParameter>& parameters, const fs::path& file) {
  std::ofstream out(file, std::ios::binary);
  auto put = [&](int64_t v) { out.write(reinterpret_cast<const char*>(&v), sizeof v); };
  put(static_cast<int64_t>(parameters.size()));
  for (const auto& p : parameters) {
    put(static_cast<int64_t>(p.name.size()));
    out.write(p.name.data(), static_cast<std::streamsize>(p.name.size()));
    put(static_cast<int64_t>(p.spec.global_shape.size()));
    for (int64_t d : p.spec.global_shape) put(d);
    for (int64_t d : p.spec.shard_offset) put(d);
    at::Tensor data = p.tensor.detach().to(at::kDouble).contiguous().cpu();
    for (int64_t d : data.sizes()) put(d);
    out.write(reinterpret_cast<const char*>(data.data_ptr<double>()),
              static_cast<std::streamsize>(data.numel() * sizeof(double)));
  }
  if (!out) throw Error("cannot write " + file.string());
}

// The parameters as the reference holds them: a ZeRO-3 shard is all-gathered over its group into
// its whole box (the tensor-parallel shard), so that the comparison is the same for every stage.
std::vector<NamedParameter> whole_parameters(const std::vector<NamedParameter>& parameters,
                                             Communicator& communicator) {
  const ReplicaGroups groups = ReplicaGroups::of(communicator);
  const Zero3Layout layout = zero3_layout(parameters, communicator, groups, c10::Device(c10::kCPU));
  std::vector<NamedParameter> wholes;
  for (const NamedParameter& p : parameters) {
    const Zero3Piece* piece = layout.find(p.name);
    if (piece == nullptr) {
      wholes.push_back(p);
      continue;
    }
    const int ranks = groups.size(p.spec.gradient_group);
    at::Tensor send = at::zeros({piece->range.chunk}, p.tensor.options().requires_grad(false));
    send.narrow(0, 0, piece->range.length).copy_(p.tensor.detach());
    at::Tensor gathered = at::empty({ranks * piece->range.chunk}, send.options());
    if (ranks > 1)
      communicator.all_gather(p.spec.gradient_group, gathered, send);
    else
      gathered.copy_(send);
    NamedParameter box = whole_box(p, *piece, p.tensor.scalar_type());
    box.tensor.view({-1}).copy_(gathered.narrow(0, 0, box.tensor.numel()));
    wholes.push_back(std::move(box));
  }
  return wholes;
}

std::vector<Shard> read_shards(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error("cannot read " + file.string());
  auto get = [&] {
    int64_t v = 0;
    in.read(reinterpret_cast<char*>(&v), sizeof v);
    return v;
  };
  std::vector<Shard> shards(static_cast<size_t>(get()));
  for (auto& shard : shards) {
    shard.name.resize(static_cast<size_t>(get()));
    in.read(shard.name.data(), static_cast<std::streamsize>(shard.name.size()));
    const int64_t ndim = get();
    for (int64_t d = 0; d < ndim; ++d) shard.global_shape.push_back(get());
    for (int64_t d = 0; d < ndim; ++d) shard.offset.push_back(get());
    std::vector<int64_t> sizes;
    for (int64_t d = 0; d < ndim; ++d) sizes.push_back(get());
    shard.data = at::empty(sizes, at::kDouble);
    in.read(reinterpret_cast<char*>(shard.data.data_ptr<double>()),
            static_cast<std::streamsize>(shard.data.numel() * sizeof(double)));
  }
  if (!in) throw Error(file.string() + " is truncated");
  return shards;
}

std::vector<double> read_losses(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw Error("cannot read " + file.string());
  std::vector<double> losses;
  for (double v; in >> v;) losses.push_back(v);
  return losses;
}

// The slice of `full` that `shard` covers.
at::Tensor slice_of(const at::Tensor& full, const Shard& shard) {
  at::Tensor view = full;
  for (int64_t d = 0; d < shard.data.dim(); ++d) view = view.narrow(d, shard.offset[d], shard.data.size(d));
  return view;
}

// Every step's value within `tolerance` relative of the reference's, from `from_step` on.
int compare_series(const fs::path& reference, const fs::path& candidate, const char* file, double tolerance,
                   size_t from_step, double& worst) {
  auto expected = read_losses(reference / file);
  const auto values = read_losses(candidate / file);
  if (from_step > expected.size()) {
    std::cerr << file << ": the reference has only " << expected.size() << " steps\n";
    return 1;
  }
  expected.erase(expected.begin(), expected.begin() + static_cast<std::ptrdiff_t>(from_step));
  if (expected.size() != values.size() || values.empty()) {
    std::cerr << file << ": count differs: reference " << expected.size() << ", candidate " << values.size() << "\n";
    return 1;
  }
  int failures = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const double rel = std::abs(values[i] - expected[i]) / std::abs(expected[i]);
    worst = std::max(worst, rel);
    if (rel > tolerance) {
      std::cerr << file << ": step " << i + 1 << ": " << std::setprecision(10) << values[i] << " vs reference "
                << expected[i] << " (relative " << rel << ")\n";
      ++failures;
    }
  }
  return failures;
}

std::vector<std::pair<int64_t, double>> read_validations(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw Error("cannot read " + file.string());
  std::vector<std::pair<int64_t, double>> out;
  for (std::pair<int64_t, double> v; in >> v.first >> v.second;) out.push_back(v);
  return out;
}

// The validation losses after the steps the reference validated at, after `from_step`.
int compare_validations(const fs::path& reference, const fs::path& candidate, double tolerance, size_t from_step) {
  if (!fs::exists(reference / "val_losses.txt")) return 0;
  std::vector<std::pair<int64_t, double>> expected;
  for (const auto& v : read_validations(reference / "val_losses.txt"))
    if (v.first > static_cast<int64_t>(from_step)) expected.push_back(v);
  const auto values = fs::exists(candidate / "val_losses.txt") ? read_validations(candidate / "val_losses.txt")
                                                                : std::vector<std::pair<int64_t, double>>{};
  if (values.size() != expected.size() || values.empty()) {
    std::cerr << "val_losses.txt: reference " << expected.size() << " validations, candidate " << values.size() << "\n";
    return 1;
  }
  int failures = 0;
  double worst = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const double rel = std::abs(values[i].second - expected[i].second) / std::abs(expected[i].second);
    worst = std::max(worst, rel);
    if (values[i].first != expected[i].first || rel > tolerance) {
      std::cerr << "val_losses.txt: step " << values[i].first << ": " << std::setprecision(10) << values[i].second
                << " vs reference step " << expected[i].first << ": " << expected[i].second << "\n";
      ++failures;
    }
  }
  std::cout << "compared " << values.size() << " validation losses (worst relative difference " << worst << ")\n";
  return failures;
}

int compare(const fs::path& reference, const fs::path& candidate, double tolerance, size_t from_step,
            bool losses_only) {
  double worst_loss = 0, worst_norm = 0;
  int failures = compare_series(reference, candidate, "losses.txt", tolerance, from_step, worst_loss);
  failures += compare_validations(reference, candidate, tolerance, from_step);
  if (!losses_only) failures += compare_series(reference, candidate, "grad_norms.txt", tolerance, from_step, worst_norm);
  const size_t steps = read_losses(candidate / "losses.txt").size();
  if (losses_only) {
    std::cout << "compared " << steps << " losses (worst relative difference " << worst_loss
              << "): " << (failures ? "FAILED" : "ok") << "\n";
    return failures ? 1 : 0;
  }
  std::map<std::string, at::Tensor> full, covered;
  for (auto& shard : read_shards(reference / "parameters.rank0.bin")) {
    full[shard.name] = shard.data;
    covered[shard.name] = at::zeros_like(shard.data, at::kBool);
  }
  double worst_parameter = 0;
  int ranks = 0;
  for (; fs::exists(candidate / ("parameters.rank" + std::to_string(ranks) + ".bin")); ++ranks) {
    for (const auto& shard : read_shards(candidate / ("parameters.rank" + std::to_string(ranks) + ".bin"))) {
      auto it = full.find(shard.name);
      if (it == full.end() || at::IntArrayRef(shard.global_shape) != it->second.sizes()) {
        std::cerr << "rank " << ranks << ": parameter " << shard.name << " is not in the reference with that shape\n";
        ++failures;
        continue;
      }
      const at::Tensor expected = slice_of(it->second, shard);
      const double scale = it->second.abs().max().item<double>();
      const double error = (shard.data - expected).abs().max().item<double>() / (scale > 0 ? scale : 1.0);
      worst_parameter = std::max(worst_parameter, error);
      if (error > tolerance) {
        std::cerr << "rank " << ranks << ": " << shard.name << " differs by " << error
                  << " (max abs difference / max abs reference value)\n";
        ++failures;
      }
      slice_of(covered[shard.name], shard).fill_(true);
    }
  }
  for (const auto& [name, mask] : covered)
    if (!mask.all().item<bool>()) {
      std::cerr << "parameter " << name << " is not entirely held by any rank of the candidate\n";
      ++failures;
    }
  std::cout << "compared " << steps << " losses (worst relative difference " << worst_loss << "), gradient norms ("
            << worst_norm << ") and "
            << full.size() << " parameters over " << ranks << " ranks (worst " << worst_parameter
            << "): " << (failures ? "FAILED" : "ok") << "\n";
  return failures ? 1 : 0;
}

int run(const std::string& config_file, const fs::path& out, const std::vector<std::string>& overrides) {
  at::set_num_threads(1);
  TrainConfig config = load_train_config(config_file, overrides);
  // mpi under mpirun, the single-process communicator for the reference run.
  std::unique_ptr<Communicator> communicator = connect_communicator(comm_settings(config), LaunchEnvironment::from_process());
  const int rank = communicator->rank(TRIAX_GROUP_WORLD);
  log::configure(rank, communicator->size(TRIAX_GROUP_WORLD), log::Level::warning, log::Level::warning);
  fs::create_directories(out);

  PluginRegistry registry;
  std::vector<std::string> plugin_paths = config.plugins.paths;
  plugin_paths.push_back(TRIAX_TEST_PLUGIN_DIR);
  registry.scan_search_paths(plugin_paths);
  // What building the run leaves allocated on this rank (parameters, optimizer state, ...): the
  // allocator's count, which a whole parameter kept alive by mistake would show.
  auto held = std::make_shared<LiveCpuBytes>();
  std::unique_ptr<Trainer> built;
  const checkpoint::RegisteredSaveStrategies save_strategies;  // checkpoints.async_save
  {
    c10::DebugInfoGuard guard(c10::DebugInfoKind::PROFILER_STATE, held);
    built = std::make_unique<Trainer>(std::move(config), registry, *communicator, nullptr, &save_strategies);
  }
  std::ofstream(out / ("held_bytes.rank" + std::to_string(rank) + ".txt")) << held->live << "\n";
  Trainer& trainer = *built;
  const TrainSummary summary = trainer.train();

  if (rank == 0) {
    std::ofstream losses(out / "losses.txt");
    losses << std::setprecision(17);
    for (double loss : summary.losses) losses << loss << "\n";
    std::ofstream norms(out / "grad_norms.txt");
    norms << std::setprecision(17);
    for (double norm : summary.grad_norms) norms << norm << "\n";
    if (!summary.validation_losses.empty()) {
      std::ofstream validations(out / "val_losses.txt");
      validations << std::setprecision(17);
      for (const auto& [step, loss] : summary.validation_losses) validations << step << " " << loss << "\n";
    }
  }
  std::ofstream(out / ("peak_live.rank" + std::to_string(rank) + ".txt")) << summary.peak_live_micro_batches << "\n";
  write_shards(whole_parameters(trainer.parameters(), *communicator),
               out / ("parameters.rank" + std::to_string(rank) + ".bin"));
  communicator->barrier(TRIAX_GROUP_WORLD);
  return 0;
}

int usage() {
  std::cerr << "usage: parity_runner run --config FILE --out DIR [--set KEY=VALUE]...\n"
               "       parity_runner compare --reference DIR --candidate DIR [--tolerance T] [--from-step K]\n"
               "               [--losses-only 1]\n";
  return 2;
}

}  // namespace
}  // namespace triax

int main(int argc, char** argv) {
  using namespace triax;
  if (argc < 2) return usage();
  const std::string mode = argv[1];
  std::map<std::string, std::string> options;
  std::vector<std::string> overrides;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    if (key == "--set")
      overrides.push_back(argv[i + 1]);
    else
      options[key] = argv[i + 1];
  }
  try {
    if (mode == "run" && options.count("--config") && options.count("--out"))
      return run(options["--config"], options["--out"], overrides);
    if (mode == "compare" && options.count("--reference") && options.count("--candidate"))
      return compare(options["--reference"], options["--candidate"],
                     options.count("--tolerance") ? std::stod(options["--tolerance"]) : 1e-5,
                     options.count("--from-step") ? std::stoul(options["--from-step"]) : 0,
                     options.count("--losses-only") && options["--losses-only"] == "1");
    return usage();
  } catch (const std::exception& e) {
    std::cerr << "parity_runner: " << e.what() << "\n";
    return 1;
  }
}
