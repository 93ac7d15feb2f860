// A well-formed plugin library for the loader's tests: a plain SGD-with-momentum optimizer and a
// sequential engine (every micro-batch forward then backward, no pipeline), registered through
// the SDK's macro like any real plugin.
//
// Built twice: as test_plugin_good.so, and with TRIAX_TEST_DUPLICATE as test_plugin_duplicate.so,
// a second library declaring the same optimizer name, which the loader must refuse.
#include <ATen/ATen.h>

#include <memory>
#include <utility>
#include <vector>

#include "triax/plugin.hpp"

namespace {

// p <- p - lr * (m <- momentum * m + g + weight_decay * p)
class TestSgd : public triax::Optimizer {
 public:
  TestSgd(std::vector<triax::OptimizerParam> params, double momentum)
      : params_(std::move(params)), momentum_(momentum) {
    for (const auto& p : params_) buffers_.push_back(at::zeros_like(p.param));
  }

  static std::unique_ptr<TestSgd> create(const triax::OptimizerContext& context,
                                         std::vector<triax::OptimizerParam> params) {
    double momentum = 0.9;
    if (context.optimizer && context.optimizer["momentum"]) momentum = context.optimizer["momentum"].as<double>();
    if (momentum < 0.0 || momentum >= 1.0)
      throw triax::ConfigError("optimizer.momentum: expected a value in [0, 1), got " + std::to_string(momentum));
    return std::make_unique<TestSgd>(std::move(params), momentum);
  }

  void step(const std::vector<at::Tensor>& grads, double learning_rate) override {
    if (grads.size() != params_.size())
      throw triax::Error(TRIAX_ERROR_INVALID_ARGUMENT, "expected " + std::to_string(params_.size()) +
                                                           " gradients, got " + std::to_string(grads.size()));
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) {
      at::Tensor& param = params_[i].param;
      at::Tensor update = grads[i].to(param.scalar_type());
      if (params_[i].weight_decay != 0.0) update = update + params_[i].weight_decay * param;
      buffers_[i].mul_(momentum_).add_(update);
      param.sub_(buffers_[i], learning_rate);
    }
  }

  int64_t state_bytes() const override {
    int64_t bytes = 0;
    for (const auto& b : buffers_) bytes += static_cast<int64_t>(b.nbytes());
    return bytes;
  }

 private:
  std::vector<triax::OptimizerParam> params_;
  std::vector<at::Tensor> buffers_;
  double momentum_;
};

class TestSequentialEngine : public triax::Engine {
 public:
  static std::unique_ptr<TestSequentialEngine> create(const triax::EngineContext& context) {
    if (context.pp_size != 1)
      throw triax::ConfigError("parallelism.pp: the test_sequential engine runs one pipeline stage only");
    return std::make_unique<TestSequentialEngine>();
  }

  triax::StepResult train_step(const triax::StepRequest& request) override {
    triax::StepResult result;
    at::Tensor total;
    for (int i = 0; i < request.micro_batches(); ++i) {
      triax::StageOutput out = request.model().forward(request.micro_batch(i));
      at::Tensor loss = out.aux_loss.defined() ? out.loss + out.aux_loss : out.loss;
      (loss / request.micro_batches()).backward();
      request.after_backward(i);
      at::Tensor value = out.loss.detach();
      total = total.defined() ? total + value : value;
      result.peak_live_micro_batches = 1;
    }
    if (total.defined()) result.loss = total / request.micro_batches();
    return result;
  }
};

}  // namespace

#ifndef TRIAX_TEST_DUPLICATE
TRIAX_PLUGIN_LIBRARY(triax::optimizer_plugin<TestSgd>("test_sgd", "1.2.3", "SGD with momentum (loader test)"),
                     triax::engine_plugin<TestSequentialEngine>("test_sequential", "0.1.0",
                                                                "one stage, micro-batches in turn (loader test)"))
#else
TRIAX_PLUGIN_LIBRARY(triax::optimizer_plugin<TestSgd>("test_sgd", "9.9.9", "a second test_sgd (loader test)"))
#endif
