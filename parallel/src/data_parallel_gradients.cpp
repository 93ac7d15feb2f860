#include "triax/parallel/data_parallel_gradients.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <sstream>

#include "triax/core/comm/communicator.hpp"
#include "triax/core/comm/parallel_context.hpp"
#include "triax/parallel/gradient_norm.hpp"
#include "triax/error.hpp"

namespace triax {
namespace {

// The accumulator hands over fp32 gradients, fp64 for fp64 parameters.
at::ScalarType gradient_dtype(const at::Tensor& parameter) {
  return parameter.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

// Runs once autograd has accumulated a micro-batch's gradient into the parameter's .grad.
class GradientReadyHook final : public torch::autograd::PostAccumulateGradHook {
 public:
  GradientReadyHook(DataParallelGradients& owner, size_t parameter) : owner_(owner), parameter_(parameter) {}
  void operator()(const torch::autograd::Variable&) override { owner_.gradient_ready(parameter_); }

 private:
  DataParallelGradients& owner_;
  size_t parameter_;
};

}  // namespace

DataParallelGradients::DataParallelGradients(const std::vector<NamedParameter>& parameters,
                                             triax_gradient_sharding sharding, int64_t bucket_cap_bytes,
                                             ReplicaGroups groups, std::vector<bool> counted_in_norm)
    : parameters_(parameters),
      sharding_(sharding),
      groups_(groups),
      bucket_cap_bytes_(bucket_cap_bytes),
      counted_in_norm_(std::move(counted_in_norm)) {
  if (sharding_ != TRIAX_GRADIENTS_WHOLE && sharding_ != TRIAX_GRADIENTS_DP_SHARDED &&
      sharding_ != TRIAX_GRADIENTS_PARAMETERS_SHARDED)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "data-parallel gradients: unknown gradient sharding " + std::to_string(sharding_));
  if (groups_.dp_size < 1 || groups_.dp_rank < 0 || groups_.dp_rank >= groups_.dp_size || groups_.ep_size < 1 ||
      groups_.dp_size % groups_.ep_size != 0)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "data-parallel gradients: dp rank " + std::to_string(groups_.dp_rank) +
                                                  " is not in a dp group of " + std::to_string(groups_.dp_size) +
                                                  " split into ep " + std::to_string(groups_.ep_size));
  if (bucket_cap_bytes_ < 1)
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                "data-parallel gradients: bucket cap of " + std::to_string(bucket_cap_bytes_) + " bytes");
  if (counted_in_norm_.size() != parameters_.size())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "data-parallel gradients: " + std::to_string(counted_in_norm_.size()) +
                                                  " counted-in-norm flags for " + std::to_string(parameters_.size()) +
                                                  " parameters");
  for (const NamedParameter& p : parameters_) {
    const triax_group group = p.spec.gradient_group;
    if (group != TRIAX_GROUP_DP && group != TRIAX_GROUP_EDP && group != TRIAX_GROUP_DP_CP &&
        group != TRIAX_GROUP_EDP_CP)
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "data-parallel gradients: parameter '" + p.name +
                                                    "' has gradient group " + group_name(group) +
                                                    ", not dp, edp, dp_cp or edp_cp");
    shards_.push_back(zero_shard(p.tensor.numel(), groups_.rank(group), groups_.size(group)));
    if ((sharding_ == TRIAX_GRADIENTS_PARAMETERS_SHARDED) != ((p.spec.flags & TRIAX_PARAM_ZERO3_SHARD) != 0))
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                  "data-parallel gradients: parameter '" + p.name + "' is " +
                      (sharding_ == TRIAX_GRADIENTS_PARAMETERS_SHARDED ? "not " : "") +
                      "a ZeRO-3 shard, and the optimizer takes " +
                      (sharding_ == TRIAX_GRADIENTS_PARAMETERS_SHARDED ? "only shards" : "no shards"));
  }
  // ZeRO-3: the model's blocks reduce-scatter the gradients into the shards during the backward.
  if (sharding_ == TRIAX_GRADIENTS_PARAMETERS_SHARDED) {
    for_optimizer_.assign(parameters_.size(), at::Tensor());
    bucket_of_.assign(parameters_.size(), -1);
    return;
  }
  plan_buckets(bucket_cap_bytes_);
}

void DataParallelGradients::plan_buckets(int64_t bucket_cap_bytes) {
  const bool sharded = sharding_ == TRIAX_GRADIENTS_DP_SHARDED;
  Bucket current;
  auto close = [&] {
    if (!current.members.empty()) buckets_.push_back(std::move(current));
    current = Bucket{};
  };
  auto bytes_of = [&](int64_t elements, at::ScalarType dtype, triax_group group) {
    // What one collective moves in: the flat bucket, or every rank's padded segment.
    return (sharded ? groups_.size(group) : 1) * elements * static_cast<int64_t>(c10::elementSize(dtype));
  };
  for (size_t k = parameters_.size(); k-- > 0;) {  // backward produces the last parameters' gradients first
    const at::Tensor& tensor = parameters_[k].tensor;
    if (tensor.numel() == 0) continue;
    const at::ScalarType dtype = gradient_dtype(tensor);
    const triax_group group = parameters_[k].spec.gradient_group;
    const int64_t elements = sharded ? shards_[k].chunk : tensor.numel();
    if (!current.members.empty() && (dtype != current.dtype || group != current.group ||
                                     bytes_of(current.elements + elements, dtype, group) > bucket_cap_bytes))
      close();
    current.dtype = dtype;
    current.group = group;
    current.members.push_back(k);
    current.offsets.push_back(current.elements);
    current.elements += elements;
  }
  close();
  bucket_of_.assign(parameters_.size(), -1);
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (size_t k : buckets_[b].members) bucket_of_[k] = static_cast<int>(b);

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

DataParallelGradients::~DataParallelGradients() {
  release_hooks();
  // Collectives still in flight (after an error): their handles keep MPI's buffers alive.
}

void DataParallelGradients::release_hooks() {
  if (!final_gradient_) return;
  for (size_t k = 0; k < parameters_.size(); ++k)
    if (bucket_of_[k] >= 0) torch::autograd::impl::set_post_acc_grad_hooks(parameters_[k].tensor, nullptr);
}

void DataParallelGradients::overlap_with_backward(std::function<at::Tensor(size_t)> final_gradient,
                                                  std::vector<bool> summed_after_backward, Communicator& communicator) {
  if (summed_after_backward.size() != parameters_.size())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "data-parallel overlap: " + std::to_string(summed_after_backward.size()) +
                                                  " flags for " + std::to_string(parameters_.size()) + " parameters");
  if (!reduces()) return;
  for (size_t k = 0; k < parameters_.size(); ++k) {
    const at::Tensor& tensor = parameters_[k].tensor;
    if (bucket_of_[k] < 0) continue;
    if (!tensor.requires_grad() || !tensor.is_leaf())
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT,
                  "data-parallel overlap: parameter '" + parameters_[k].name + "' is not a leaf requiring grad");
  }
  release_hooks();
  final_gradient_ = std::move(final_gradient);
  overlap_communicator_ = &communicator;
  held_.assign(buckets_.size(), false);
  for (size_t k = 0; k < parameters_.size(); ++k)
    if (bucket_of_[k] >= 0 && summed_after_backward[k]) held_[bucket_of_[k]] = true;
  for (size_t k = 0; k < parameters_.size(); ++k)
    if (bucket_of_[k] >= 0)
      torch::autograd::impl::set_post_acc_grad_hooks(parameters_[k].tensor,
                                                     std::make_unique<GradientReadyHook>(*this, k));
}

void DataParallelGradients::set_parameter_chunks(std::vector<int> chunk_of_parameter, int chunk_count) {
  if (chunk_of_parameter.size() != parameters_.size())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "data-parallel gradients: " + std::to_string(chunk_of_parameter.size()) +
                                                  " chunk indices for " + std::to_string(parameters_.size()) +
                                                  " parameters");
  for (int chunk : chunk_of_parameter)
    if (chunk < 0 || chunk >= chunk_count)
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "data-parallel gradients: chunk " + std::to_string(chunk) + " of " +
                                                    std::to_string(chunk_count));
  chunk_count_ = chunk_count;
  chunk_of_ = std::move(chunk_of_parameter);
}

void DataParallelGradients::begin_step(int64_t micro_batches) {
  micro_batches_ = micro_batches;
  backwards_done_.assign(static_cast<size_t>(chunk_count_), 0);
  ready_.assign(parameters_.size(), false);
  arrived_.assign(buckets_.size(), 0);
  next_bucket_ = 0;
  in_flight_.clear();
  started_gradients_.assign(parameters_.size(), at::Tensor());
  started_in_backward_ = 0;
  armed_.assign(static_cast<size_t>(chunk_count_), final_gradient_ && micro_batches_ == 1);
  // The last step's whole gradients are no longer needed: holding them through this step's
  // backward would keep a second set alive (the whole model's bf16 gradients when they are
  // handed over as computed).
  if (sharding_ != TRIAX_GRADIENTS_DP_SHARDED) for_optimizer_.assign(parameters_.size(), at::Tensor());
}

void DataParallelGradients::after_backward(int chunk) {
  if (chunk < 0 || chunk >= chunk_count_ || static_cast<size_t>(chunk) >= backwards_done_.size())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "data-parallel gradients: a backward through chunk " +
                                                  std::to_string(chunk) + " of " + std::to_string(chunk_count_) +
                                                  (backwards_done_.empty() ? " before begin_step" : ""));
  const int64_t done = ++backwards_done_[static_cast<size_t>(chunk)];
  armed_[static_cast<size_t>(chunk)] = final_gradient_ && done == micro_batches_ - 1;
}

void DataParallelGradients::gradient_ready(size_t k) {
  const size_t chunk = chunk_of_.empty() ? 0 : static_cast<size_t>(chunk_of_[k]);
  if (chunk >= armed_.size() || !armed_[chunk] || bucket_of_[k] < 0 || ready_[k]) return;
  ready_[k] = true;
  ++arrived_[bucket_of_[k]];
  at::NoGradGuard no_grad;
  const size_t started = next_bucket_;
  start_ready_buckets();
  started_in_backward_ += static_cast<int64_t>(next_bucket_ - started);
  for (InFlight& flight : in_flight_) flight.operation->test();  // lets MPI progress
}

// In bucket order, so that every dp rank posts the same collectives in the same order.
void DataParallelGradients::start_ready_buckets() {
  while (next_bucket_ < buckets_.size() && !held_[next_bucket_] &&
         arrived_[next_bucket_] == buckets_[next_bucket_].members.size()) {
    const Bucket& bucket = buckets_[next_bucket_];
    std::vector<at::Tensor> gradients(parameters_.size());
    for (size_t k : bucket.members) gradients[k] = started_gradients_[k] = final_gradient_(k);
    in_flight_.push_back(start_bucket(next_bucket_, gradients, *overlap_communicator_));
    ++next_bucket_;
  }
}

void DataParallelGradients::reduce_over_data_parallel(const std::vector<at::Tensor>& gradients,
                                                      Communicator& communicator) {
  armed_.assign(armed_.size(), false);
  if (gradients.size() != parameters_.size())
    throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "data-parallel reduction: " + std::to_string(gradients.size()) +
                                                  " gradients for " + std::to_string(parameters_.size()) +
                                                  " parameters");
  for (size_t k = 0; k < gradients.size(); ++k) {
    if (gradients[k].numel() != parameters_[k].tensor.numel())
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "data-parallel reduction: the gradient of '" + parameters_[k].name +
                                                    "' holds " + std::to_string(gradients[k].numel()) +
                                                    " elements, the parameter " +
                                                    std::to_string(parameters_[k].tensor.numel()));
    if (k < started_gradients_.size() && started_gradients_[k].defined() &&
        !started_gradients_[k].is_same(gradients[k]))
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "data-parallel reduction: the gradient of '" + parameters_[k].name +
                                                    "' is not the tensor whose reduction started in the backward");
  }
  at::NoGradGuard no_grad;
  // Whole gradients are reduced in place (low-precision ones: see finish_bucket); ZeRO-3 shards'
  // arrived reduced.
  if (sharding_ != TRIAX_GRADIENTS_DP_SHARDED) for_optimizer_ = gradients;
  if (reduces()) {
    for (; next_bucket_ < buckets_.size(); ++next_bucket_)
      in_flight_.push_back(start_bucket(next_bucket_, gradients, communicator));
    for (InFlight& flight : in_flight_) finish_bucket(flight);
  }
  in_flight_.clear();
  started_gradients_.clear();
  next_bucket_ = 0;
}

DataParallelGradients::InFlight DataParallelGradients::start_bucket(size_t b, const std::vector<at::Tensor>& gradients,
                                                                    Communicator& communicator) {
  Bucket& bucket = buckets_[b];
  InFlight flight;
  flight.bucket = b;
  const at::Tensor& first = gradients[bucket.members.front()];
  if (sharding_ == TRIAX_GRADIENTS_WHOLE) {
    for (size_t k : bucket.members) flight.members.push_back(gradients[k]);
    if (bucket.members.size() == 1 && first.is_contiguous() && first.scalar_type() == bucket.dtype) {  // no copies
      flight.operation = communicator.start_all_reduce(bucket.group, first, TRIAX_REDUCE_SUM);
      return flight;
    }
    flight.flat = at::empty({bucket.elements}, first.options().dtype(bucket.dtype));
    for (size_t m = 0; m < bucket.members.size(); ++m) {
      const at::Tensor& g = gradients[bucket.members[m]];
      flight.flat.narrow(0, bucket.offsets[m], g.numel()).view(g.sizes()).copy_(g);
    }
    flight.operation = communicator.start_all_reduce(bucket.group, flight.flat, TRIAX_REDUCE_SUM);
    return flight;
  }
  // Rank-major layout: row r of `input` is [chunk r of p1, chunk r of p2, ...], each chunk padded
  // with zeros to ceil(n / group size) elements, so the reduce-scatter leaves this rank's row
  // (summed) here.
  at::Tensor input = at::zeros({groups_.size(bucket.group), bucket.elements}, first.options().dtype(bucket.dtype));
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
  flight.operation =
      communicator.start_reduce_scatter(bucket.group, bucket.shards, input.view({-1}), TRIAX_REDUCE_SUM);
  return flight;
}

void DataParallelGradients::finish_bucket(InFlight& flight) {
  flight.operation->wait();
  const Bucket& bucket = buckets_[flight.bucket];
  // Summed over the bucket's group, divided by dp x cp (see the header: the mean for experts too).
  const double mean = 1.0 / static_cast<double>(groups_.replicas());
  if (sharding_ == TRIAX_GRADIENTS_DP_SHARDED) {
    bucket.shards.mul_(mean);
    return;
  }
  if (!flight.flat.defined()) {
    flight.members.front().mul_(mean);
    return;
  }
  flight.flat.mul_(mean);
  for (size_t m = 0; m < bucket.members.size(); ++m) {
    const at::Tensor& g = flight.members[m];
    at::Tensor mean_gradient = flight.flat.narrow(0, bucket.offsets[m], g.numel()).view(g.sizes());
    // A gradient handed over in low precision: the optimizer gets the fp32 mean itself, which a
    // copy back into the gradient would round.
    if (g.scalar_type() == bucket.dtype)
      g.copy_(mean_gradient);
    else
      for_optimizer_[bucket.members[m]] = std::move(mean_gradient);
  }
}

GlobalNorm DataParallelGradients::norm(std::optional<double> max_norm, Communicator& communicator) {
  return global_norm(for_optimizer_, counted_in_norm_, max_norm, communicator, TRIAX_GROUP_WORLD);
}

at::Tensor DataParallelGradients::clip(std::optional<double> max_norm, Communicator& communicator) {
  // Each element is counted by one owner somewhere in the world (experts on other ep ranks too).
  return clip_by_global_norm(for_optimizer_, counted_in_norm_, max_norm, communicator, TRIAX_GROUP_WORLD);
}

std::vector<std::vector<size_t>> DataParallelGradients::bucket_members() const {
  std::vector<std::vector<size_t>> members;
  for (const Bucket& bucket : buckets_) members.push_back(bucket.members);
  return members;
}

std::string DataParallelGradients::describe() const {
  std::ostringstream out;
  if (sharding_ == TRIAX_GRADIENTS_PARAMETERS_SHARDED)
    return "gradients: ZeRO-3, reduce-scattered over dp = " + std::to_string(groups_.dp_size) +
           " into this rank's parameter shards by the model's blocks during each backward, divided by dp";
  if (sharding_ == TRIAX_GRADIENTS_WHOLE && groups_.replicas() == 1)
    return "gradients: dp = 1, no data-parallel reduction";
  int expert_buckets = 0;
  for (const Bucket& bucket : buckets_)
    expert_buckets += bucket.group == TRIAX_GROUP_EDP || bucket.group == TRIAX_GROUP_EDP_CP ? 1 : 0;
  out << "gradients: mean over dp = " << groups_.dp_size;
  if (groups_.cp_size > 1) out << " x cp = " << groups_.cp_size;
  if (expert_buckets > 0)
    out << " (experts: summed over edp = " << groups_.size(TRIAX_GROUP_EDP) << (groups_.cp_size > 1 ? " x cp" : "")
        << " in " << expert_buckets << " bucket(s), divided by dp" << (groups_.cp_size > 1 ? " x cp)" : ")");
  out << ", "
      << (sharding_ == TRIAX_GRADIENTS_WHOLE ? "all-reduced" : "reduce-scattered into this rank's ZeRO shards")
      << " in " << buckets_.size() << " bucket(s) of at most " << bucket_cap_bytes_ / double(1 << 20) << " MiB"
      << (final_gradient_ ? ", overlapping the last micro-batch's backward"
                          : ", after the last micro-batch's backward");
  return out.str();
}

}  // namespace triax
