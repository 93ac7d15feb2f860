#include "newton_schulz_batches.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <utility>

namespace triax::plugins {
namespace {

bool is_tall(const std::vector<int64_t>& shape) { return shape[1] > shape[2]; }

}  // namespace

std::vector<std::vector<size_t>> newton_schulz_batches(const std::vector<std::vector<int64_t>>& shapes,
                                                       int64_t element_bytes, int64_t max_bytes) {
  // Ordered by iteration shape, so that every rank forms the same batches from the same shapes.
  std::map<std::pair<int64_t, int64_t>, std::vector<size_t>> by_iteration_shape;
  for (size_t i = 0; i < shapes.size(); ++i)
    by_iteration_shape[std::minmax(shapes[i][1], shapes[i][2])].push_back(i);
  std::vector<std::vector<size_t>> batches;
  for (const auto& [shape, items] : by_iteration_shape) {
    const int64_t matrix_bytes = shape.first * shape.second * element_bytes;
    int64_t batch_bytes = 0;
    bool open = false;  // a batch of this shape takes more
    for (size_t i : items) {
      const int64_t bytes = shapes[i][0] * matrix_bytes;
      if (!open || batch_bytes + bytes > max_bytes) {
        batches.emplace_back();
        batch_bytes = 0;
        open = true;
      }
      batches.back().push_back(i);
      batch_bytes += bytes;
    }
  }
  return batches;
}

std::vector<at::Tensor> orthogonalise_all(const std::vector<at::Tensor>& matrices,
                                          const NewtonSchulzCoefficients& coefficients, int64_t steps,
                                          at::ScalarType compute, int64_t max_bytes) {
  std::vector<std::vector<int64_t>> shapes;
  for (const at::Tensor& m : matrices) shapes.push_back(m.sizes().vec());
  std::vector<at::Tensor> results(matrices.size());
  for (const std::vector<size_t>& batch : newton_schulz_batches(shapes, c10::elementSize(compute), max_bytes)) {
    std::vector<at::Tensor> wide;  // the tall matrices transposed, as orthogonalise() iterates them
    std::vector<int64_t> counts;
    for (size_t i : batch) {
      wide.push_back(is_tall(shapes[i]) ? matrices[i].transpose(1, 2) : matrices[i]);
      counts.push_back(shapes[i][0]);
    }
    // One matrix alone needs no stacked copy.
    const at::Tensor stacked = wide.size() == 1 ? wide.front() : at::cat(wide);
    const std::vector<at::Tensor> parts =
        orthogonalise(stacked, coefficients, steps, compute).split_with_sizes(counts);
    for (size_t k = 0; k < batch.size(); ++k)
      results[batch[k]] = is_tall(shapes[batch[k]]) ? parts[k].transpose(1, 2).contiguous() : parts[k];
  }
  return results;
}

}  // namespace triax::plugins
