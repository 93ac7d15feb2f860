#include "triax/core/checkpoint/checkpoint_reader.hpp"

#include <ATen/ATen.h>

#include <fstream>
#include <sstream>

#include "triax/core/checkpoint/checkpoint_error.hpp"
#include "triax/core/checkpoint/checkpoint_folder.hpp"
#include "triax/tensor_text.hpp"
#include "triax/interop/checksum.hpp"
#include "triax/interop/hdf5_file.hpp"

namespace triax::checkpoint {
namespace {

using interop::crc32_of;
using interop::Hdf5File;

int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// True where a box element lies inside the unpadded part of the whole tensor.
at::Tensor meaningful_mask(const std::vector<int64_t>& offset, const std::vector<int64_t>& shape,
                           const std::vector<int64_t>& unpadded) {
  at::Tensor mask = at::ones(shape, at::TensorOptions().dtype(at::kBool));
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t keep = std::clamp<int64_t>(unpadded[d] - offset[d], 0, shape[d]);
    if (keep < shape[d]) mask.narrow(static_cast<int64_t>(d), keep, shape[d] - keep).fill_(false);
  }
  return mask;
}

// The piece that holds exactly the wanted elements of the wanted box, if one does: the case of
// every load at the saving topology, served by one read and one copy.
const StoredPiece* exact_piece(const std::vector<StoredPiece>& pieces, const std::vector<int64_t>& offset,
                               const std::vector<int64_t>& shape, int64_t element_begin, int64_t numel) {
  for (const StoredPiece& piece : pieces)
    if (piece.box_offset == offset && piece.box_shape == shape && piece.element_begin == element_begin &&
        piece.numel == numel && piece.unpadded_shape == piece.global_shape)
      return &piece;
  return nullptr;
}

}  // namespace

CheckpointReader::CheckpointReader(const std::string& path) : folder_(resolve_checkpoint(path)) {
  metadata_ = CheckpointMetadata::read((folder_ / kMetadataFile).string());
  for (size_t f = 0; f < metadata_.files.size(); ++f) {
    const std::filesystem::path file_path = folder_ / metadata_.files[f];
    files_.push_back(std::make_unique<Hdf5File>(Hdf5File::open_read(file_path.string())));
    const Hdf5File& file = *files_.back();
    auto read_piece_info = [&](const std::string& dataset) {
      StoredPiece piece;
      piece.file = f;
      piece.dataset = dataset;
      piece.dtype = file.dataset_dtype(dataset);
      piece.global_shape = file.integers(dataset, "global_shape");
      piece.unpadded_shape = file.integers(dataset, "unpadded_shape");
      piece.box_offset = file.integers(dataset, "box_offset");
      piece.box_shape = file.integers(dataset, "box_shape");
      piece.element_begin = file.integers(dataset, "element_begin").at(0);
      piece.per_parameter = file.integers(dataset, "per_parameter").at(0) != 0;
      piece.crc32 = static_cast<uint32_t>(file.integers(dataset, "crc32").at(0));
      piece.numel = product(file.dataset_shape(dataset));
      const size_t rank = piece.global_shape.size();
      if (piece.unpadded_shape.size() != rank || piece.box_offset.size() != rank || piece.box_shape.size() != rank ||
          (!piece.per_parameter && piece.element_begin + piece.numel > product(piece.box_shape)))
        throw CheckpointError("checkpoint file " + file_path.string() + ", " + dataset +
                              ": inconsistent shard description (global " + shape_text(piece.global_shape) +
                              ", box " + shape_text(piece.box_offset) + " + " + shape_text(piece.box_shape) + ")");
      return piece;
    };
    for (const std::string& name : file.children("/model"))
      model_pieces_[name].push_back(read_piece_info("/model/" + name));
    for (const std::string& name : file.children("/optimizer"))
      for (const std::string& state : file.children("/optimizer/" + name))
        state_pieces_[{name, state}].push_back(read_piece_info("/optimizer/" + name + "/" + state));
  }
}

CheckpointReader::~CheckpointReader() = default;

std::string CheckpointReader::resolved_config() const {
  std::ifstream in(folder_ / kConfigFile);
  if (!in) throw CheckpointError("checkpoint " + folder_.string() + ": " + kConfigFile + " is missing");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> CheckpointReader::parameter_names() const {
  std::vector<std::string> names;
  for (const auto& [name, pieces] : model_pieces_) names.push_back(name);
  return names;
}

std::vector<int64_t> CheckpointReader::parameter_shape(const std::string& name) const {
  auto it = model_pieces_.find(name);
  if (it == model_pieces_.end())
    throw CheckpointError("checkpoint " + folder_.string() + " has no tensor " + name);
  return it->second.front().unpadded_shape;
}

std::string CheckpointReader::parameter_dtype(const std::string& name) const {
  auto it = model_pieces_.find(name);
  if (it == model_pieces_.end())
    throw CheckpointError("checkpoint " + folder_.string() + " has no tensor " + name);
  return it->second.front().dtype;
}

at::Tensor CheckpointReader::read_piece(const StoredPiece& piece) const {
  const Hdf5File& file = *files_.at(piece.file);
  at::Tensor data = file.read_tensor(piece.dataset);
  const uint32_t crc = crc32_of(data);
  if (crc != piece.crc32)
    throw CheckpointError("checkpoint file " + file.path() + ", " + piece.dataset + ": checksum mismatch (stored " +
                          std::to_string(piece.crc32) + ", read " + std::to_string(crc) +
                          "): the file is corrupt; load an older checkpoint");
  return data;
}

void CheckpointReader::check_shape(const std::string& what, const std::vector<StoredPiece>& pieces,
                                   const std::vector<int64_t>& expected) const {
  for (const StoredPiece& piece : pieces)
    if (piece.unpadded_shape != expected)
      throw CheckpointError("checkpoint " + folder_.string() + ": " + what + " has shape " +
                            shape_text(piece.unpadded_shape) + " in " + metadata_.files[piece.file] +
                            ", but this model's is " + shape_text(expected) +
                            " (a checkpoint of another model shape?)");
}

at::Tensor CheckpointReader::assemble(const std::string& what, const std::vector<StoredPiece>& pieces,
                                      const std::vector<int64_t>& offset, const std::vector<int64_t>& shape,
                                      at::Tensor& covered) const {
  at::Tensor out;
  covered = at::zeros(shape, at::TensorOptions().dtype(at::kBool));
  for (const StoredPiece& piece : pieces) {
    // The part of the target box this piece's box holds, inside the unpadded region.
    std::vector<int64_t> low(shape.size()), high(shape.size());
    bool overlaps = true;
    for (size_t d = 0; d < shape.size(); ++d) {
      low[d] = std::max(offset[d], piece.box_offset[d]);
      high[d] = std::min({offset[d] + shape[d], piece.box_offset[d] + piece.box_shape[d], piece.unpadded_shape[d]});
      overlaps = overlaps && low[d] < high[d];
    }
    if (!overlaps) continue;
    at::Tensor data = read_piece(piece).reshape({-1});
    if (!out.defined()) out = at::zeros(shape, data.options());
    at::Tensor box, held;
    if (piece.element_begin == 0 && piece.numel == product(piece.box_shape)) {
      box = data.view(piece.box_shape);
    } else {  // a ZeRO shard: a range of the box's elements
      box = at::zeros({product(piece.box_shape)}, data.options());
      box.narrow(0, piece.element_begin, piece.numel).copy_(data);
      box = box.view(piece.box_shape);
      held = at::zeros({product(piece.box_shape)}, at::TensorOptions().dtype(at::kBool));
      held.narrow(0, piece.element_begin, piece.numel).fill_(true);
      held = held.view(piece.box_shape);
    }
    at::Tensor source = box, target = out, source_held = held, target_covered = covered;
    for (size_t d = 0; d < shape.size(); ++d) {
      const auto dim = static_cast<int64_t>(d);
      source = source.narrow(dim, low[d] - piece.box_offset[d], high[d] - low[d]);
      if (held.defined()) source_held = source_held.narrow(dim, low[d] - piece.box_offset[d], high[d] - low[d]);
      target = target.narrow(dim, low[d] - offset[d], high[d] - low[d]);
      target_covered = target_covered.narrow(dim, low[d] - offset[d], high[d] - low[d]);
    }
    if (held.defined()) {
      target.copy_(at::where(source_held, source.to(target.scalar_type()), target));
      target_covered.logical_or_(source_held);
    } else {
      target.copy_(source);
      target_covered.fill_(true);
    }
  }
  if (!out.defined()) {
    if (product(shape) > 0 && at::any(meaningful_mask(offset, shape, pieces.front().unpadded_shape)).item<bool>())
      throw CheckpointError("checkpoint " + folder_.string() + ": no stored piece of " + what + " covers the box at " +
                            shape_text(offset) + " of shape " + shape_text(shape) + " (incomplete checkpoint)");
    out = at::zeros(shape, at::TensorOptions().dtype(at::kFloat));
  }
  return out;
}

void CheckpointReader::load_parameter(const NamedParameter& target) const {
  const std::string& name = target.name;
  auto model = model_pieces_.find(name);
  if (model == model_pieces_.end())
    throw CheckpointError("checkpoint " + folder_.string() + " has no tensor " + name +
                          " (saved by a model of another shape or architecture?)");
  check_shape(name, model->second, target.spec.meaningful_shape());
  auto master = state_pieces_.find({name, "master"});
  const std::vector<StoredPiece>& pieces = master != state_pieces_.end() ? master->second : model->second;
  if (master != state_pieces_.end()) check_shape(name + " (fp32 master)", pieces, target.spec.meaningful_shape());
  const std::vector<int64_t> shape = target.tensor.sizes().vec();
  at::NoGradGuard no_grad;
  if (const StoredPiece* piece = exact_piece(pieces, target.spec.shard_offset, shape, 0, target.tensor.numel())) {
    target.tensor.detach().copy_(read_piece(*piece).view(shape));
    return;
  }
  at::Tensor covered;
  at::Tensor values = assemble(name, pieces, target.spec.shard_offset, shape, covered);
  const at::Tensor needed = meaningful_mask(target.spec.shard_offset, shape, target.spec.meaningful_shape());
  if (!at::all(covered.logical_or(needed.logical_not())).item<bool>())
    throw CheckpointError("checkpoint " + folder_.string() + ": the stored pieces of " + name +
                          " leave part of this rank's shard uncovered (incomplete checkpoint)");
  target.tensor.detach().copy_(values.to(target.tensor.scalar_type()));
}

at::Tensor CheckpointReader::whole_parameter(const std::string& name) const {
  auto model = model_pieces_.find(name);
  if (model == model_pieces_.end()) throw CheckpointError("checkpoint " + folder_.string() + " has no tensor " + name);
  auto master = state_pieces_.find({name, "master"});
  const std::vector<StoredPiece>& pieces = master != state_pieces_.end() ? master->second : model->second;
  const std::vector<int64_t> shape = model->second.front().unpadded_shape;
  at::Tensor covered;
  at::Tensor values = assemble(name, pieces, std::vector<int64_t>(shape.size(), 0), shape, covered);
  if (!at::all(covered).item<bool>())
    throw CheckpointError("checkpoint " + folder_.string() + ": the stored pieces of " + name +
                          " do not cover the whole tensor (incomplete checkpoint)");
  return values;
}

bool CheckpointReader::has_state(const std::string& parameter, const std::string& state) const {
  return state_pieces_.count({parameter, state}) > 0;
}

void CheckpointReader::load_state(const NamedParameter& parameter, const std::string& state, const at::Tensor& live,
                                  int64_t element_offset, bool per_parameter) const {
  const std::string what = "optimizer state '" + state + "' of " + parameter.name;
  auto it = state_pieces_.find({parameter.name, state});
  if (it == state_pieces_.end()) throw CheckpointError("checkpoint " + folder_.string() + " has no " + what);
  at::NoGradGuard no_grad;
  if (per_parameter) {
    live.copy_(read_piece(it->second.front()).reshape(live.sizes()).to(live.scalar_type()));
    return;
  }
  check_shape(what, it->second, parameter.spec.meaningful_shape());
  const std::vector<int64_t> shape = parameter.tensor.sizes().vec();
  if (const StoredPiece* piece =
          exact_piece(it->second, parameter.spec.shard_offset, shape, element_offset, live.numel())) {
    live.copy_(read_piece(*piece).view(live.sizes()));
    return;
  }
  at::Tensor covered;
  at::Tensor values = assemble(what, it->second, parameter.spec.shard_offset, shape, covered);
  const int64_t count = live.numel();
  const at::Tensor needed =
      meaningful_mask(parameter.spec.shard_offset, shape, parameter.spec.meaningful_shape()).reshape({-1}).narrow(
          0, element_offset, count);
  if (!at::all(covered.reshape({-1}).narrow(0, element_offset, count).logical_or(needed.logical_not())).item<bool>())
    throw CheckpointError("checkpoint " + folder_.string() + ": the stored pieces of " + what +
                          " leave part of this rank's shard uncovered (incomplete checkpoint)");
  live.copy_(values.reshape({-1}).narrow(0, element_offset, count).view(live.sizes()).to(live.scalar_type()));
}

std::optional<at::Tensor> CheckpointReader::rng_state(int rank, const std::string& generator) const {
  if (rank < 0 || static_cast<size_t>(rank) >= files_.size()) return std::nullopt;
  const Hdf5File& file = *files_[static_cast<size_t>(rank)];
  const std::string dataset = "/rng/" + generator;
  if (!file.exists(dataset)) return std::nullopt;
  at::Tensor state = file.read_tensor(dataset);
  if (crc32_of(state) != static_cast<uint32_t>(file.integers(dataset, "crc32").at(0)))
    throw CheckpointError("checkpoint file " + file.path() + ", " + dataset + ": checksum mismatch");
  return state;
}

std::vector<CheckpointReader::DatasetCheck> CheckpointReader::verify() const {
  std::vector<DatasetCheck> checks;
  auto check = [&](const StoredPiece& piece) {
    DatasetCheck c;
    c.file = metadata_.files[piece.file];
    c.dataset = piece.dataset;
    c.dtype = piece.dtype;
    const Hdf5File& file = *files_.at(piece.file);
    try {
      c.shape = file.dataset_shape(piece.dataset);
      at::Tensor data = read_piece(piece);
      c.bytes = static_cast<int64_t>(data.nbytes());
    } catch (const std::exception& e) {
      c.problem = e.what();
    }
    checks.push_back(std::move(c));
  };
  for (const auto& [name, pieces] : model_pieces_)
    for (const StoredPiece& piece : pieces) check(piece);
  for (const auto& [key, pieces] : state_pieces_)
    for (const StoredPiece& piece : pieces) check(piece);
  return checks;
}

}  // namespace triax::checkpoint
