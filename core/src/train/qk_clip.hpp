// QK-clip (MuonClip): when the optimizer has a qk_clip_threshold, the model's attention layers
// keep each query head's largest logit over the step's forwards, and after every optimizer step
// the query and key rows of the heads above the threshold are scaled so that their logit would
// have been the threshold, in the parameters and the optimizer's masters alike (ABI 1.12).
#pragma once

#include <string>

#include "step/model_chunks.hpp"
#include "triax/core/plugins/plugin_instances.hpp"

namespace triax {

class QkClip {
 public:
  // Off unless the optimizer asks; a model that cannot report its logits is then a ConfigError
  // naming the key and the model plugin (`origin`: the config file).
  QkClip(ModelChunks& model, OptimizerInstance& optimizer, const std::string& origin);

  bool enabled() const { return threshold_ > 0.0; }
  // After an optimizer step, on every rank.
  void after_step();
  std::string describe() const;

 private:
  ModelChunks& model_;
  OptimizerInstance& optimizer_;
  double threshold_ = 0.0;
};

}  // namespace triax
