#include "gradients/step_gradients.hpp"

#include "triax/core/comm/communicator.hpp"
#include "triax/core/plugins/plugin_instances.hpp"

namespace triax {
namespace {

GradientHandoff handoff_for(const StepGradientOptions& options, const TiedGradients& tied,
                            const OptimizerInstance& optimizer) {
  return choose_gradient_handoff(
      {options.accumulate_in_fp32, options.micro_batches, !tied.empty(), optimizer.takes_scaled_gradients()});
}

}  // namespace

StepGradients::StepGradients(const std::vector<NamedParameter>& parameters, std::vector<int> chunk_of_parameter,
                             int chunk_count, std::unique_ptr<TiedGradients> tied, const ReplicaOwnership& ownership,
                             const OptimizerInstance& optimizer, Communicator& communicator,
                             const StepGradientOptions& options)
    : tied_(std::move(tied)),
      accumulator_(parameters, options.accumulate_in_fp32, handoff_for(options, *tied_, optimizer)),
      data_parallel_(parameters, optimizer.gradient_sharding(), options.bucket_cap_bytes, ownership.groups(),
                     ownership.counted_in_norm(parameters, optimizer.gradient_sharding() != TRIAX_GRADIENTS_WHOLE)),
      communicator_(communicator),
      micro_batches_(options.micro_batches) {
  if (ownership.groups().replicas() > 1 && communicator.has_asynchronous_collectives() && options.overlap_with_backward)
    data_parallel_.overlap_with_backward([this](size_t k) { return accumulator_.final_gradient(k); },
                                         tied_->tied_parameters(), communicator);
  data_parallel_.set_parameter_chunks(std::move(chunk_of_parameter), chunk_count);
}

StepGradients::~StepGradients() = default;

void StepGradients::begin_step() {
  accumulator_.zero();
  data_parallel_.begin_step(micro_batches_);
}

void StepGradients::after_backward(int chunk, size_t first, size_t end) {
  accumulator_.after_backward(first, end);
  data_parallel_.after_backward(chunk);
}

GlobalNorm StepGradients::reduce(std::optional<double> clip_grad) {
  const std::vector<at::Tensor>& gradients = accumulator_.gradients();
  tied_->sum(gradients);
  data_parallel_.reduce_over_data_parallel(gradients, communicator_);
  return data_parallel_.norm(clip_grad, communicator_);
}

std::vector<std::string> StepGradients::describe(const std::string& model_dtype) const {
  std::vector<std::string> lines;
  if (accumulator_.handoff() == GradientHandoff::kAsComputed)
    lines.push_back("gradients: handed to the optimizer as the backward computed them, in " + model_dtype +
                    ": one micro-batch a step leaves nothing to sum in fp32, so no fp32 gradient buffers");
  lines.push_back(data_parallel_.describe());
  if (!tied_->empty()) lines.push_back("tied across pipeline stages: " + tied_->describe());
  return lines;
}

}  // namespace triax
