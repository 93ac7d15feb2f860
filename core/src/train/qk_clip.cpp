#include "train/qk_clip.hpp"

#include <sstream>

#include "triax/error.hpp"

namespace triax {

QkClip::QkClip(ModelChunks& model, OptimizerInstance& optimizer, const std::string& origin)
    : model_(model), optimizer_(optimizer), threshold_(optimizer.qk_clip_threshold()) {
  if (!enabled()) return;
  try {
    model_.track_attention_logits(true);
  } catch (const Error& e) {
    if (e.status() != TRIAX_ERROR_UNSUPPORTED) throw;
    throw ConfigError((origin.empty() ? "" : origin + ": ") +
                      "optimizer.optimizer_factory.qk_clip_threshold: QK-clip needs the model's attention logits: " +
                      e.what());
  }
}

void QkClip::after_step() {
  if (enabled()) optimizer_.scale_parameters(model_.qk_clip_factors(threshold_));
}

std::string QkClip::describe() const {
  std::ostringstream out;
  out << "QK-clip: query and key rows of attention heads whose largest logit exceeds " << threshold_
      << " are scaled back to it after every step";
  return out.str();
}

}  // namespace triax
