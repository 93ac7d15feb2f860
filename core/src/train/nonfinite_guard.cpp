#include "train/nonfinite_guard.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <sstream>
#include <utility>

#include "triax/core/checkpoint/checkpoint_folder.hpp"
#include "triax/report/log.hpp"
#include "triax/error.hpp"

namespace triax {
namespace {

std::string number_text(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

std::string values_text(int64_t step, double loss, double norm) {
  return "step " + std::to_string(step) + ": the loss is " + number_text(loss) + " and the gradient norm " +
         number_text(norm);
}

// Both values in one host read.
std::pair<double, double> read(const at::Tensor& loss, const at::Tensor& norm) {
  const at::Tensor values = at::stack({loss.to(at::kDouble).reshape({}), norm.to(at::kDouble).reshape({})}).cpu();
  return {values[0].item<double>(), values[1].item<double>()};
}

}  // namespace

NonFiniteGuard::NonFiniteGuard(const TrainConfig& config)
    : skip_(config.general.nonfinite_policy == "skip"),
      max_consecutive_(config.general.nonfinite_max_consecutive_skips),
      checkpoints_path_(config.checkpoints.checkpoints_path) {}

std::string NonFiniteGuard::last_good_checkpoint() const {
  const auto latest = checkpoint::latest_checkpoint(checkpoints_path_);
  if (!latest) return "no checkpoint was saved yet";
  return "the last good checkpoint is " + latest->string() + " (resume with checkpoints.resume_checkpoint_path=" +
         checkpoints_path_ + ")";
}

bool NonFiniteGuard::admit(int64_t step, const at::Tensor& loss, const at::Tensor& norm) {
  if (!skip_) return true;
  const auto [loss_value, norm_value] = read(loss, norm);
  if (std::isfinite(loss_value) && std::isfinite(norm_value)) {
    consecutive_ = 0;
    return true;
  }
  ++skipped_;
  if (++consecutive_ > max_consecutive_)
    throw Error(values_text(step, loss_value, norm_value) + ": " + std::to_string(consecutive_) +
                " non-finite steps in a row (general.nonfinite_max_consecutive_skips = " +
                std::to_string(max_consecutive_) + "), stopping; " + last_good_checkpoint());
  log::warning(values_text(step, loss_value, norm_value) + ": step skipped, parameters and optimizer state unchanged (" +
               std::to_string(consecutive_) + " in a row, at most " + std::to_string(max_consecutive_) + "; " +
               std::to_string(skipped_) + " skipped in all)");
  return false;
}

void NonFiniteGuard::check(int64_t step, double loss, double norm) const {
  if (skip_ || (std::isfinite(loss) && std::isfinite(norm))) return;
  throw Error(values_text(step, loss, norm) +
              ": training diverged, stopping (general.nonfinite_policy: stop); " + last_good_checkpoint() +
              ". Lower optimizer.learning_rate_scheduler.learning_rate, set optimizer.clip_grad, raise the warm-up, "
              "or set general.nonfinite_policy: skip.");
}

void NonFiniteGuard::check(int64_t step, const at::Tensor& loss, const at::Tensor& norm) const {
  if (skip_) return;
  const auto [loss_value, norm_value] = read(loss, norm);
  check(step, loss_value, norm_value);
}

}  // namespace triax
