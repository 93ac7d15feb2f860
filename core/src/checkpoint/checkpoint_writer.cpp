#include "triax/core/checkpoint/checkpoint_writer.hpp"

#include <ATen/ATen.h>

#include <chrono>
#include <cerrno>
#include <system_error>
#include <thread>

#include "triax/core/checkpoint/checkpoint_error.hpp"
#include "triax/core/checkpoint/checkpoint_folder.hpp"
#include "comm/world_reduce.hpp"
#include "triax/config_reader.hpp"
#include "triax/core/comm/communicator.hpp"
#include "triax/faults/fault_injection.hpp"
#include "triax/faults/preemption.hpp"
#include "triax/interop/durable_file.hpp"
#include "triax/interop/checksum.hpp"
#include "triax/interop/hdf5_file.hpp"

namespace triax::checkpoint {
namespace {

using interop::crc32_of;
using interop::Hdf5File;

using Clock = std::chrono::steady_clock;

// A named point of a save (docs/reliability.md lists them): tests kill a rank there with
// TRIAX_FAULT, and a second preemption signal aborts the save there while nothing of it is visible.
void reach(const char* point, int rank, int64_t step) {
  fault::kill_if_armed(point, rank, step);
  if (preemption::abort_requested())
    throw CheckpointError("checkpoint of step " + std::to_string(step) +
                          ": aborted by a second preemption signal (at '" + point +
                          "'); the previous checkpoint stays latest");
}

// A contiguous CPU copy of a tensor, for writing (GPU tensors come to the host here).
at::Tensor host_copy(const at::Tensor& tensor) { return tensor.detach().to(at::kCPU).contiguous(); }

void describe_piece(Hdf5File& file, const std::string& dataset, const ParameterSpec& spec,
                    const std::vector<int64_t>& box_shape, int64_t element_begin, bool per_parameter, uint32_t crc) {
  file.set_integers(dataset, "global_shape", spec.global_shape);
  file.set_integers(dataset, "unpadded_shape", spec.meaningful_shape());
  file.set_integers(dataset, "box_offset", spec.shard_offset);
  file.set_integers(dataset, "box_shape", box_shape);
  file.set_integers(dataset, "element_begin", {element_begin});
  file.set_integers(dataset, "per_parameter", {per_parameter ? 1 : 0});
  file.set_integers(dataset, "crc32", {static_cast<int64_t>(crc)});
}

}  // namespace

std::string parameter_dataset(const std::string& parameter_name) { return "/model/" + parameter_name; }
std::string optimizer_dataset(const std::string& parameter_name, const std::string& state_name) {
  return "/optimizer/" + parameter_name + "/" + state_name;
}

CheckpointWriter::CheckpointWriter(std::filesystem::path root, Communicator& communicator)
    : root_(std::move(root)), communicator_(communicator) {}

int64_t CheckpointWriter::write_rank_file(const std::filesystem::path& path, const RankContents& contents,
                                          int64_t step) const {
  const int rank = communicator_.rank(TRIAX_GROUP_WORLD);
  DurableFile durable(path);  // visible under its name only once complete and on disk
  Hdf5File file = Hdf5File::create(durable.temporary_path().string());
  file.set_integers("/", "rank", {rank});
  file.set_integers("/", "step", {step});
  file.set_integers("/", "mesh_ranks",
                    {communicator_.rank(TRIAX_GROUP_DP), communicator_.rank(TRIAX_GROUP_TP),
                     communicator_.rank(TRIAX_GROUP_PP)});
  int64_t bytes = 0;
  // Half-way through this rank's tensors (parameters, then optimizer state): mid_rank_file.
  const size_t total = contents.parameters.size() + contents.optimizer_state.size();
  size_t written = 0;
  auto halfway = [&] {
    reach("mid_rank_file", rank, step);
    if (fault::armed("slow_write", rank, step)) std::this_thread::sleep_for(fault::kSlowWriteDelay);
    if (fault::armed("disk_full", rank, step))
      throw std::system_error(ENOSPC, std::generic_category(),
                              "writing " + durable.temporary_path().string() + " (TRIAX_FAULT=disk_full)");
  };
  auto count_one = [&] {
    if (++written == (total + 1) / 2) halfway();
  };
  if (total == 0) halfway();  // a rank that stores only its random generators
  for (const NamedParameter* parameter : contents.parameters) {
    const NamedParameter& p = *parameter;
    const at::Tensor data = host_copy(p.tensor);
    const std::string dataset = parameter_dataset(p.name);
    file.write_tensor(dataset, data);
    const auto range = contents.element_ranges.find(p.name);
    if (range != contents.element_ranges.end())
      describe_piece(file, dataset, p.spec, range->second.box_shape, range->second.element_begin, false, crc32_of(data));
    else
      describe_piece(file, dataset, p.spec, data.sizes().vec(), 0, false, crc32_of(data));
    bytes += static_cast<int64_t>(data.nbytes());
    count_one();
  }
  for (const StateTensorToSave& state : contents.optimizer_state) {
    const at::Tensor data = host_copy(state.tensor);
    const std::string dataset = optimizer_dataset(state.parameter->name, state.name);
    file.write_tensor(dataset, data);
    const auto range = contents.element_ranges.find(state.parameter->name);
    describe_piece(file, dataset, state.parameter->spec,
                   range != contents.element_ranges.end() ? range->second.box_shape
                                                          : state.parameter->tensor.sizes().vec(),
                   state.element_offset, state.per_parameter, crc32_of(data));
    bytes += static_cast<int64_t>(data.nbytes());
    count_one();
  }
  for (const auto& [name, generator_state] : contents.rng_states) {
    const at::Tensor data = host_copy(generator_state);
    file.write_tensor("/rng/" + name, data);
    file.set_integers("/rng/" + name, "crc32", {static_cast<int64_t>(crc32_of(data))});
  }
  file.close();
  reach("before_rank_commit", rank, step);
  durable.commit();
  return bytes;
}

bool CheckpointWriter::all_ranks_agree(bool ok) {
  return world_reduce(communicator_, ok ? 1 : 0, TRIAX_REDUCE_MIN) == 1;
}

SaveResult CheckpointWriter::save(const CheckpointMetadata& metadata, const RankContents& contents,
                                  const std::string& resolved_config) {
  const auto start = Clock::now();
  const std::filesystem::path partial = begin(metadata.step);
  const RankFileWrite written = write_own_file(partial, contents, metadata.step);
  conclude(metadata, partial, written, resolved_config);
  SaveResult result;
  result.bytes_written = written.bytes;
  result.folder = root_ / step_folder_name(metadata.step);
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

std::filesystem::path CheckpointWriter::begin(int64_t step) {
  const std::filesystem::path partial = root_ / partial_folder_name(step);
  reach("save_start", communicator_.rank(TRIAX_GROUP_WORLD), step);
  prepare_partial_folder(partial, step);
  return partial;
}

void CheckpointWriter::conclude(const CheckpointMetadata& metadata, const std::filesystem::path& partial,
                                const RankFileWrite& written, const std::optional<std::string>& resolved_config) {
  agree_files_written(written, metadata.step);
  complete_folder(metadata, partial, resolved_config);
}

void CheckpointWriter::prepare_partial_folder(const std::filesystem::path& partial, int64_t step) {
  // Rank 0 prepares an empty .partial folder (a crashed save may have left one).
  std::string failure;
  if (communicator_.rank(TRIAX_GROUP_WORLD) == 0) {
    try {
      std::error_code ec;
      std::filesystem::remove_all(partial, ec);
      std::filesystem::create_directories(partial, ec);
      if (ec) throw CheckpointError("cannot create " + partial.string() + ": " + ec.message());
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  if (!all_ranks_agree(failure.empty()))
    throw CheckpointError("checkpoint of step " + std::to_string(step) + ": rank 0 could not prepare " +
                          partial.string() + (failure.empty() ? "" : ": " + failure));
}

RankFileWrite CheckpointWriter::write_own_file(const std::filesystem::path& partial, const RankContents& contents,
                                               int64_t step) const {
  const auto start = Clock::now();
  const int rank = communicator_.rank(TRIAX_GROUP_WORLD);
  RankFileWrite written;
  try {
    reach("before_rank_file", rank, step);
    written.bytes = write_rank_file(partial / rank_file_name(rank), contents, step);
  } catch (const std::exception& e) {
    written.failure = e.what();
  }
  written.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return written;
}

void CheckpointWriter::agree_files_written(const RankFileWrite& written, int64_t step) {
  const int rank = communicator_.rank(TRIAX_GROUP_WORLD);
  fault::kill_if_armed("after_rank_file", rank, step);
  if (!all_ranks_agree(written.failure.empty()))
    throw CheckpointError("checkpoint of step " + std::to_string(step) + " failed; the previous checkpoint stays " +
                          "latest" +
                          (written.failure.empty() ? " (another rank could not write its file)" : ": " + written.failure));
  fault::kill_if_armed("after_agreement", rank, step);
}

void CheckpointWriter::complete_folder(const CheckpointMetadata& metadata, const std::filesystem::path& partial,
                                       const std::optional<std::string>& resolved_config) {
  std::string failure;
  if (communicator_.rank(TRIAX_GROUP_WORLD) == 0) {
    try {
      publish(metadata, partial, resolved_config);
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  if (!all_ranks_agree(failure.empty()))
    throw CheckpointError(failure.empty()
                              ? "checkpoint of step " + std::to_string(metadata.step) + ": rank 0 could not complete it"
                              : failure);
}

// Rank 0, once every rank's file is durable: completes the folder and makes it visible.
void CheckpointWriter::publish(const CheckpointMetadata& metadata, const std::filesystem::path& partial,
                               const std::optional<std::string>& resolved_config) const {
  const int64_t step = metadata.step;
  for (const std::string& name : metadata.files)
    if (!std::filesystem::exists(partial / name))
      throw CheckpointError("checkpoint of step " + std::to_string(step) + ": " + (partial / name).string() +
                            " is missing although its rank reported success (is " + root_.string() +
                            " a folder every rank shares?)");
  if (resolved_config) write_folder_files(metadata, partial, *resolved_config);
  reach("before_rename", 0, step);
  move_into_place(partial, step);
}

void CheckpointWriter::write_folder_files(const CheckpointMetadata& metadata, const std::filesystem::path& partial,
                                          const std::string& resolved_config) const {
  if (communicator_.rank(TRIAX_GROUP_WORLD) != 0) return;
  write_file_durably(partial / kConfigFile,
                     "# the configuration of the run that saved this checkpoint\n" + resolved_config);
  write_file_durably(partial / kMetadataFile, to_yaml_text(metadata.to_yaml()));
}

// The complete .partial folder becomes the step's folder and `latest` names it.
void CheckpointWriter::move_into_place(const std::filesystem::path& partial, int64_t step) const {
  const std::filesystem::path final_folder = root_ / step_folder_name(step);
  std::error_code ec;
  // Saving a step that exists (a run resumed from an older step): the new one replaces it.
  const std::filesystem::path replaced = root_ / ("." + step_folder_name(step) + ".replaced");
  if (std::filesystem::exists(final_folder)) {
    std::filesystem::remove_all(replaced, ec);
    std::filesystem::rename(final_folder, replaced, ec);
    if (ec) throw CheckpointError("cannot move the older " + final_folder.string() + " aside: " + ec.message());
  }
  rename_durably(partial, final_folder);
  fault::kill_if_armed("after_rename", 0, step);
  point_latest(root_, final_folder);
  fault::kill_if_armed("after_latest", 0, step);
  std::filesystem::remove_all(replaced, ec);
}

}  // namespace triax::checkpoint
