#include "triax/core/data_parallel_gradients.hpp"

#include <ATen/ATen.h>

#include <sstream>

#include "triax/core/communicator.hpp"
#include "triax/core/gradient_norm.hpp"
#include "triax/error.hpp"

namespace triax {
namespace {

// The accumulator hands over fp32 gradients, fp64 for fp64 parameters.
at::ScalarType gradient_dtype(const at::Tensor& parameter) {
  return parameter.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

}  // namespace

DataParallelGradients::DataParallelGradients(const std::vector<NamedParameter>& parameters,
                                             triax_gradient_sharding sharding, int64_t bucket_cap_bytes, int dp_rank,
                                             int dp_size, std::vector<bool> counted_in_norm)
    : parameters_(parameters),
      sharding_(sharding),
      dp_rank_(dp_rank),
      dp_size_(dp_size),
      bucket_cap_bytes_(bucket_cap_bytes),
      counted_in_norm_(std::move(counted_in_norm)) {
  if (sharding_ != TRIAX_GRADIENTS_WHOLE && sharding_ != TRIAX_GRADIENTS_DP_SHARDED)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "data-parallel gradients: unknown gradient sharding " + std::to_string(sharding_));
  if (dp_size_ < 1 || dp_rank_ < 0 || dp_rank_ >= dp_size_)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "data-parallel gradients: dp rank " + std::to_string(dp_rank_) +
                                                  " is not in a dp group of " + std::to_string(dp_size_));
  if (bucket_cap_bytes_ < 1)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "data-parallel gradients: bucket cap of " + std::to_string(bucket_cap_bytes_) + " bytes");
  if (counted_in_norm_.size() != parameters_.size())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "data-parallel gradients: " + std::to_string(counted_in_norm_.size()) +
                                                  " counted-in-norm flags for " + std::to_string(parameters_.size()) +
                                                  " parameters");
  for (const NamedParameter& p : parameters_) shards_.push_back(zero_shard(p.tensor.numel(), dp_rank_, dp_size_));
  plan_buckets(bucket_cap_bytes_);
}

void DataParallelGradients::plan_buckets(int64_t bucket_cap_bytes) {
  const bool sharded = sharding_ == TRIAX_GRADIENTS_DP_SHARDED;
  Bucket current;
  auto close = [&] {
    if (!current.members.empty()) buckets_.push_back(std::move(current));
    current = Bucket{};
  };
  auto bytes_of = [&](int64_t elements, at::ScalarType dtype) {
    // What one collective moves in: the flat bucket, or every rank's padded segment.
    return (sharded ? dp_size_ : 1) * elements * static_cast<int64_t>(c10::elementSize(dtype));
  };
  for (size_t k = parameters_.size(); k-- > 0;) {  // backward produces the last parameters' gradients first
    const at::Tensor& tensor = parameters_[k].tensor;
    if (tensor.numel() == 0) continue;
    const at::ScalarType dtype = gradient_dtype(tensor);
    const int64_t elements = sharded ? shards_[k].chunk : tensor.numel();
    if (!current.members.empty() &&
        (dtype != current.dtype || bytes_of(current.elements + elements, dtype) > bucket_cap_bytes))
      close();
    current.dtype = dtype;
    current.members.push_back(k);
    current.offsets.push_back(current.elements);
    current.elements += elements;
  }
  close();

  for_optimizer_.assign(parameters_.size(), at::Tensor());
  if (!sharded) return;
  // This rank's shards live in one persistent buffer per bucket: the reduce-scatter's output.
  for (size_t k = 0; k < parameters_.size(); ++k) {  // empty parameters keep an empty shard
    const at::Tensor& tensor = parameters_[k].tensor;
    for_optimizer_[k] = at::zeros({0}, tensor.options().dtype(gradient_dtype(tensor)).requires_grad(false));
  }
  for (Bucket& bucket : buckets_) {
    const at::Tensor& first = parameters_[bucket.members.front()].tensor;
    bucket.shards = at::zeros({bucket.elements}, first.options().dtype(bucket.dtype).requires_grad(false));
    for (size_t m = 0; m < bucket.members.size(); ++m) {
      const size_t k = bucket.members[m];
      for_optimizer_[k] = bucket.shards.narrow(0, bucket.offsets[m], shards_[k].length);
    }
  }
}

void DataParallelGradients::reduce_over_data_parallel(const std::vector<at::Tensor>& gradients,
                                                      Communicator& communicator) {
  if (gradients.size() != parameters_.size())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "data-parallel reduction: " + std::to_string(gradients.size()) +
                                                  " gradients for " + std::to_string(parameters_.size()) +
                                                  " parameters");
  for (size_t k = 0; k < gradients.size(); ++k)
    if (gradients[k].numel() != parameters_[k].tensor.numel())
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "data-parallel reduction: the gradient of '" + parameters_[k].name +
                                                    "' holds " + std::to_string(gradients[k].numel()) +
                                                    " elements, the parameter " +
                                                    std::to_string(parameters_[k].tensor.numel()));
  at::NoGradGuard no_grad;
  if (sharding_ == TRIAX_GRADIENTS_WHOLE) {
    if (dp_size_ > 1)
      for (const Bucket& bucket : buckets_) all_reduce_bucket(bucket, gradients, communicator);
    for_optimizer_ = gradients;
    return;
  }
  for (Bucket& bucket : buckets_) reduce_scatter_bucket(bucket, gradients, communicator);
}

void DataParallelGradients::all_reduce_bucket(const Bucket& bucket, const std::vector<at::Tensor>& gradients,
                                              Communicator& communicator) {
  const double mean = 1.0 / static_cast<double>(dp_size_);
  const at::Tensor& single = gradients[bucket.members.front()];
  if (bucket.members.size() == 1 && single.is_contiguous()) {  // a bucket of one: no copies
    communicator.all_reduce(TRIAX_GROUP_DP, single, TRIAX_REDUCE_SUM);
    single.mul_(mean);
    return;
  }
  at::Tensor flat = at::empty({bucket.elements}, single.options().dtype(bucket.dtype));
  for (size_t m = 0; m < bucket.members.size(); ++m) {
    const at::Tensor& g = gradients[bucket.members[m]];
    flat.narrow(0, bucket.offsets[m], g.numel()).view(g.sizes()).copy_(g);
  }
  communicator.all_reduce(TRIAX_GROUP_DP, flat, TRIAX_REDUCE_SUM);
  flat.mul_(mean);
  for (size_t m = 0; m < bucket.members.size(); ++m) {
    const at::Tensor& g = gradients[bucket.members[m]];
    g.copy_(flat.narrow(0, bucket.offsets[m], g.numel()).view(g.sizes()));
  }
}

// Rank-major layout: row r of `input` is [chunk r of p1, chunk r of p2, ...], each chunk padded
// with zeros to ceil(n / dp) elements, so the reduce-scatter leaves row dp_rank (summed) here.
void DataParallelGradients::reduce_scatter_bucket(Bucket& bucket, const std::vector<at::Tensor>& gradients,
                                                  Communicator& communicator) {
  const at::Tensor& first = gradients[bucket.members.front()];
  at::Tensor input = at::zeros({dp_size_, bucket.elements}, first.options().dtype(bucket.dtype));
  for (size_t m = 0; m < bucket.members.size(); ++m) {
    const size_t k = bucket.members[m];
    const at::Tensor flat = gradients[k].reshape({-1});
    const int64_t numel = flat.numel(), chunk = shards_[k].chunk;
    const int64_t full_rows = numel / chunk, rest = numel - full_rows * chunk;
    at::Tensor columns = input.narrow(1, bucket.offsets[m], chunk);
    if (full_rows > 0)
      columns.narrow(0, 0, full_rows).copy_(flat.narrow(0, 0, full_rows * chunk).view({full_rows, chunk}));
    if (rest > 0) columns[full_rows].narrow(0, 0, rest).copy_(flat.narrow(0, full_rows * chunk, rest));
  }
  communicator.reduce_scatter(TRIAX_GROUP_DP, bucket.shards, input.view({-1}), TRIAX_REDUCE_SUM);
  bucket.shards.mul_(1.0 / static_cast<double>(dp_size_));
}

at::Tensor DataParallelGradients::clip(std::optional<double> max_norm, Communicator& communicator) {
  // Whole gradients are identical on every dp rank: the model-parallel group covers the model
  // once. Shards are disjoint over dp: the whole world covers it once.
  const triax_group group = sharding_ == TRIAX_GRADIENTS_DP_SHARDED ? TRIAX_GROUP_WORLD : TRIAX_GROUP_MP;
  return clip_by_global_norm(for_optimizer_, counted_in_norm_, max_norm, communicator, group);
}

std::vector<std::vector<size_t>> DataParallelGradients::bucket_members() const {
  std::vector<std::vector<size_t>> members;
  for (const Bucket& bucket : buckets_) members.push_back(bucket.members);
  return members;
}

std::string DataParallelGradients::describe() const {
  std::ostringstream out;
  if (sharding_ == TRIAX_GRADIENTS_WHOLE && dp_size_ == 1) return "gradients: dp = 1, no data-parallel reduction";
  out << "gradients: mean over dp = " << dp_size_ << " after the last micro-batch, "
      << (sharding_ == TRIAX_GRADIENTS_WHOLE ? "all-reduced" : "reduce-scattered into this rank's ZeRO shards")
      << " in " << buckets_.size() << " bucket(s) of at most " << bucket_cap_bytes_ / double(1 << 20) << " MiB";
  return out.str();
}

}  // namespace triax
