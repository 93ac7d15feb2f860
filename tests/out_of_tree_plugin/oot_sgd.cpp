// A plain SGD optimizer (p <- p - lr * (g + weight_decay * p)), built out of tree against the
// installed triax SDK.
#include <ATen/ATen.h>

#include <memory>
#include <triax/plugin.hpp>
#include <utility>
#include <vector>

namespace {

class OotSgd : public triax::Optimizer {
 public:
  explicit OotSgd(std::vector<triax::OptimizerParam> params) : params_(std::move(params)) {}

  static std::unique_ptr<OotSgd> create(const triax::OptimizerContext&, std::vector<triax::OptimizerParam> params) {
    return std::make_unique<OotSgd>(std::move(params));
  }

  void step(const std::vector<at::Tensor>& grads, double learning_rate) override {
    if (grads.size() != params_.size()) throw triax::Error(TRIAX_ERROR_INVALID_ARGUMENT, "wrong gradient count");
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) {
      at::Tensor& p = params_[i].param;
      at::Tensor update = grads[i].to(p.scalar_type());
      if (params_[i].weight_decay != 0.0) update = update + params_[i].weight_decay * p;
      p.sub_(update, learning_rate);
    }
  }

  int64_t state_bytes() const override { return 0; }

 private:
  std::vector<triax::OptimizerParam> params_;
};

}  // namespace

TRIAX_PLUGIN_LIBRARY(triax::optimizer_plugin<OotSgd>("oot_sgd", "0.1.0", "plain SGD, built out of tree"))
