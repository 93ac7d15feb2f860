#include "triax/interop/tensor_map.hpp"

#include <ATen/ATen.h>

#include <set>

#include "triax/error.hpp"
#include "triax/glob_match.hpp"
#include "triax/tensor_text.hpp"

namespace triax::interop {
namespace {

bool concatenates(const HfTensorRule& rule) { return rule.kind == TRIAX_HF_CONCAT || rule.kind == TRIAX_HF_INTERLEAVE; }

// Part `part` of a CONCAT or INTERLEAVE parameter: its extent hf_sizes[part] along rule.dim.
std::vector<int64_t> block_shape(const HfTensorRule& rule, size_t part) {
  std::vector<int64_t> shape = rule.shape;
  shape[static_cast<size_t>(rule.dim)] = rule.hf_sizes[part];
  return shape;
}

// The shape of HF tensor `part` of a rule.
std::vector<int64_t> part_shape(const HfTensorRule& rule, size_t part) {
  std::vector<int64_t> shape = rule.shape;
  if (rule.kind == TRIAX_HF_CONCAT) shape = block_shape(rule, part);
  if (rule.kind == TRIAX_HF_INTERLEAVE) {  // the block with dims 0 .. dim merged
    shape = block_shape(rule, part);
    const auto end = shape.begin() + rule.dim + 1;
    int64_t merged = 1;
    for (auto it = shape.begin(); it != end; ++it) merged *= *it;
    shape.erase(shape.begin(), end);
    shape.insert(shape.begin(), merged);
  }
  if (rule.kind == TRIAX_HF_STACK) shape.erase(shape.begin() + rule.dim);
  if (rule.kind == TRIAX_HF_FLATTEN) {
    shape[static_cast<size_t>(rule.dim)] *= shape[static_cast<size_t>(rule.dim) + 1];
    shape.erase(shape.begin() + rule.dim + 1);
  }
  return shape;
}

// Where part `part` of a rule starts along rule.dim (CONCAT, INTERLEAVE).
int64_t part_offset(const HfTensorRule& rule, size_t part) {
  int64_t offset = 0;
  for (size_t i = 0; i < part; ++i) offset += rule.hf_sizes[i];
  return offset;
}

// One HF tensor of a rule: parts first .. first + count - 1. An INTERLEAVE may name one tensor for
// several consecutive parts (Mamba-2's in_proj: z, x, B, C and dt rows in one tensor, grouped by
// head group in the parameter): that tensor is those parts concatenated along its dim 0.
struct HfRun {
  std::string name;
  size_t first = 0, count = 0;
};

std::vector<HfRun> runs_of(const HfTensorRule& rule) {
  std::vector<HfRun> runs;
  for (size_t i = 0; i < rule.hf_names.size(); ++i) {
    if (rule.kind == TRIAX_HF_INTERLEAVE && !runs.empty() && runs.back().name == rule.hf_names[i])
      ++runs.back().count;
    else
      runs.push_back({rule.hf_names[i], i, 1});
  }
  return runs;
}

// The shape of a run's HF tensor: its parts' shapes stacked along dim 0.
std::vector<int64_t> run_shape(const HfTensorRule& rule, const HfRun& run) {
  std::vector<int64_t> shape = part_shape(rule, run.first);
  for (size_t i = run.first + 1; i < run.first + run.count; ++i) shape[0] += part_shape(rule, i)[0];
  return shape;
}

// The whole parameter of `rule` from its HF tensors in `weights` (checked present and shaped).
at::Tensor compose(const HfTensorRule& rule, const HfWeights& weights) {
  std::vector<at::Tensor> parts;
  for (const HfRun& run : runs_of(rule)) {
    const at::Tensor whole = weights.find(run.name)->read(run.name);
    for (int64_t i = 0, offset = 0; i < static_cast<int64_t>(run.count); ++i) {
      const int64_t rows = part_shape(rule, run.first + static_cast<size_t>(i))[0];
      parts.push_back(run.count == 1 ? whole : whole.narrow(0, offset, rows));
      offset += rows;
    }
  }
  if (rule.kind == TRIAX_HF_RENAME) return parts[0];
  if (rule.kind == TRIAX_HF_FLATTEN) return parts[0].reshape(rule.shape);
  for (size_t i = 0; i < parts.size(); ++i) {
    parts[i] = parts[i].to(parts[0].scalar_type());
    if (rule.kind == TRIAX_HF_INTERLEAVE) parts[i] = parts[i].reshape(block_shape(rule, i));
  }
  return concatenates(rule) ? at::cat(parts, rule.dim) : at::stack(parts, rule.dim);
}

// HF part `index` of a whole parameter, as the rule cuts it.
at::Tensor hf_part(const at::Tensor& parameter, const HfTensorRule& rule, size_t index) {
  at::Tensor whole = parameter.detach();
  if (concatenates(rule)) whole = whole.narrow(rule.dim, part_offset(rule, index), rule.hf_sizes[index]);
  if (rule.kind == TRIAX_HF_INTERLEAVE) whole = whole.reshape(part_shape(rule, index));
  if (rule.kind == TRIAX_HF_STACK) whole = whole.select(rule.dim, static_cast<int64_t>(index));
  if (rule.kind == TRIAX_HF_FLATTEN) whole = whole.reshape(part_shape(rule, 0));
  return whole;
}

}  // namespace

TensorMap::TensorMap(std::vector<HfTensorRule> rules, std::string owner)
    : rules_(std::move(rules)), owner_(std::move(owner)) {
  std::set<std::string> parameters, hf_names;
  for (const HfTensorRule& rule : rules_) {
    // A plugin built for a later ABI may name a kind this host does not know.
    if (rule.kind < TRIAX_HF_RENAME || rule.kind > TRIAX_HF_INTERLEAVE)
      throw Error(owner_ + ": tensor map rule for '" + rule.triax_name + "': unknown rule kind " +
                  std::to_string(static_cast<int>(rule.kind)));
    if (rule.kind == TRIAX_HF_IGNORE) continue;
    auto fail = [&](const std::string& what) {
      throw Error(owner_ + ": tensor map rule for '" + rule.triax_name + "': " + what);
    };
    const int64_t ndim = static_cast<int64_t>(rule.shape.size());
    if (rule.kind == TRIAX_HF_RENAME && rule.hf_names.size() != 1) fail("a rename names exactly one HF tensor");
    if (rule.kind == TRIAX_HF_FLATTEN) {
      if (rule.hf_names.size() != 1) fail("a flatten names exactly one HF tensor");
      if (rule.dim < 0 || rule.dim + 1 >= ndim) fail("dims " + std::to_string(rule.dim) + " and the next outside the shape");
    }
    if (concatenates(rule)) {
      if (rule.dim < 0 || rule.dim >= ndim) fail("dim " + std::to_string(rule.dim) + " outside the shape");
      if (rule.kind == TRIAX_HF_INTERLEAVE && rule.dim < 1) fail("an interleave needs dim >= 1 (dim 0 is a concat)");
      if (rule.hf_sizes.size() != rule.hf_names.size()) fail("hf_sizes and hf_names differ in count");
      if (part_offset(rule, rule.hf_sizes.size()) != rule.shape[static_cast<size_t>(rule.dim)])
        fail("hf_sizes do not add up to " + shape_text(rule.shape) + " along dim " + std::to_string(rule.dim));
    }
    if (rule.kind == TRIAX_HF_STACK) {
      if (rule.dim < 0 || rule.dim >= ndim) fail("dim " + std::to_string(rule.dim) + " outside the shape");
      if (static_cast<int64_t>(rule.hf_names.size()) != rule.shape[static_cast<size_t>(rule.dim)])
        fail(std::to_string(rule.hf_names.size()) + " HF tensors stacked into " + shape_text(rule.shape) +
             " along dim " + std::to_string(rule.dim));
    }
    if (rule.optional) continue;  // an alias may name what another rule reads
    if (!parameters.insert(rule.triax_name).second) fail("the parameter has two rules");
    for (const HfRun& run : runs_of(rule))
      if (!hf_names.insert(run.name).second) fail("HF tensor '" + run.name + "' is claimed by two rules");
  }
}

bool TensorMap::is_alias(const HfTensorRule& rule) const {
  if (!rule.optional) return false;
  for (const HfTensorRule& other : rules_)
    if (&other != &rule && other.kind != TRIAX_HF_IGNORE && !other.optional && other.triax_name == rule.triax_name)
      return true;
  return false;
}

bool TensorMap::ignored(const std::string& hf_name) const {
  for (const HfTensorRule& rule : rules_)
    if (rule.kind == TRIAX_HF_IGNORE)
      for (const std::string& glob : rule.hf_names)
        if (glob_match(glob, hf_name)) return true;
  return false;
}

TensorMap::Weights TensorMap::read(const HfWeights& weights, const std::string& config,
                                   std::optional<at::ScalarType> declared) const {
  // Names, dtypes and shapes first: a bad folder is refused before any weight is copied.
  std::set<std::string> claimed;
  std::vector<const HfTensorRule*> present;
  std::map<at::ScalarType, int64_t> bytes_per_dtype;
  for (const HfTensorRule& rule : rules_) {
    if (rule.kind == TRIAX_HF_IGNORE) continue;
    size_t found = 0;
    for (const std::string& name : rule.hf_names) found += weights.find(name) != nullptr ? 1 : 0;
    for (const std::string& name : rule.hf_names) claimed.insert(name);
    if (found == 0 && rule.optional) continue;
    for (const HfRun& run : runs_of(rule)) {
      const std::string& name = run.name;
      const SafetensorsFile* file = weights.find(name);
      const std::vector<int64_t> expected = run_shape(rule, run);
      if (file == nullptr)
        throw Error(weights.where() + ": tensor '" + name + "' is missing (" + config + " implies shape " +
                    shape_text(expected) + ")");
      if (!is_hf_weight_dtype(file->dtype(name)))
        throw Error(file->path() + ": tensor '" + name + "': dtype " + safetensors_dtype_name(file->dtype(name)) +
                    " is not supported for weights (expected F32, BF16 or F16)");
      if (file->shape(name) != expected)
        throw Error(file->path() + ": tensor '" + name + "' has shape " + shape_text(file->shape(name)) + ", but " +
                    config + " implies " + shape_text(expected));
      if (!is_alias(rule)) bytes_per_dtype[file->dtype(name)] += file->nbytes(name);
    }
    present.push_back(&rule);
  }
  for (const std::string& name : weights.names())
    if (!claimed.count(name) && !ignored(name))
      throw Error(weights.find(name)->path() + ": unexpected tensor '" + name + "' (not part of the model " + config +
                  " describes)");

  Weights out;
  for (const HfTensorRule* rule : present)
    if (!is_alias(*rule)) out.parameters[rule->triax_name] = compose(*rule, weights);
  for (const HfTensorRule* rule : present) {
    if (!is_alias(*rule)) continue;
    const at::Tensor& parameter = out.parameters.at(rule->triax_name);
    const at::Tensor alias = compose(*rule, weights);
    if (alias.scalar_type() != parameter.scalar_type() || !at::equal(alias, parameter))
      throw Error(weights.find(rule->hf_names[0])->path() + ": tensor '" + rule->hf_names[0] +
                  "' differs from the parameter '" + rule->triax_name + "' it must equal (" + config + " ties them)");
  }
  if (bytes_per_dtype.size() == 1) {
    out.dtype = bytes_per_dtype.begin()->first;
  } else {
    out.dtype = at::kFloat;
    int64_t most = -1;
    for (const auto& [dtype, bytes] : bytes_per_dtype)
      if (bytes > most) most = bytes, out.dtype = dtype;
    if (declared && bytes_per_dtype.count(*declared)) out.dtype = *declared;
  }
  return out;
}

TensorMap::Tensors TensorMap::write(const std::map<std::string, at::Tensor>& parameters, at::ScalarType dtype,
                                    const std::string& origin) const {
  auto fail = [&](const std::string& what) { throw Error(origin + ": " + what); };
  struct Part {
    const at::Tensor* parameter;
    HfTensorRule rule;
    HfRun run;
  };
  auto parts = std::make_shared<std::vector<Part>>();
  Tensors out;
  std::set<std::string> written;
  for (const HfTensorRule& rule : rules_) {
    if (rule.kind == TRIAX_HF_IGNORE || is_alias(rule)) continue;
    auto found = parameters.find(rule.triax_name);
    if (found == parameters.end() || !found->second.defined()) {
      if (rule.optional) continue;
      fail("tensor '" + rule.triax_name + "' is missing (" + owner_ + "'s tensor map names it)");
    }
    const at::Tensor& tensor = found->second;
    if (!at::isFloatingType(tensor.scalar_type()))
      fail("tensor '" + rule.triax_name + "' has dtype " + c10::toString(tensor.scalar_type()) +
           ", expected a floating type");
    if (tensor.sizes().vec() != rule.shape)
      fail("tensor '" + rule.triax_name + "' has shape " + shape_text(tensor.sizes()) + ", but " + owner_ +
           "'s tensor map implies " + shape_text(rule.shape));
    written.insert(rule.triax_name);
    for (const HfRun& run : runs_of(rule)) {
      out.entries.push_back({run.name, dtype, run_shape(rule, run)});
      parts->push_back({&tensor, rule, run});
    }
  }
  for (const auto& [name, tensor] : parameters)
    if (!written.count(name)) fail("unexpected tensor '" + name + "' (not in " + owner_ + "'s tensor map)");
  out.tensor_of = [parts, dtype](size_t i) {
    const Part& part = (*parts)[i];
    std::vector<at::Tensor> pieces;
    for (size_t index = part.run.first; index < part.run.first + part.run.count; ++index)
      pieces.push_back(hf_part(*part.parameter, part.rule, index));
    return (pieces.size() == 1 ? pieces[0] : at::cat(pieces, 0)).to(dtype).contiguous();
  };
  return out;
}

}  // namespace triax::interop
