// Side outputs of modules, carried out of blocks that autograd-function runners execute
// (triax/layers/side_outputs.hpp).
#include "triax/layers/side_outputs.hpp"

#include <ATen/core/grad_mode.h>

#include <string>
#include <utility>

#include "triax/error.hpp"

namespace triax {
namespace {

// What the modules of the block being run set, in order.
struct Capture {
  std::vector<std::pair<SideOutput*, std::vector<at::Tensor>>> caught;
  Capture* outer = nullptr;
};

// The block a carrier runs on this thread (runners nest when a block runs another).
thread_local Capture* innermost = nullptr;

class OpenCapture {
 public:
  explicit OpenCapture(Capture& capture) : capture_(capture) {
    capture_.outer = innermost;
    innermost = &capture_;
  }
  ~OpenCapture() { innermost = capture_.outer; }
  OpenCapture(const OpenCapture&) = delete;
  OpenCapture& operator=(const OpenCapture&) = delete;

 private:
  Capture& capture_;
};

}  // namespace

bool SideOutput::wanted() { return at::GradMode::is_enabled() || innermost != nullptr; }

void SideOutput::set(std::vector<at::Tensor> values) {
  for (size_t i = 0; i < values.size(); ++i)
    if (!values[i].defined())
      throw Error(TRIAX_ERROR_INVALID_ARGUMENT, "side output: value " + std::to_string(i) + " is undefined");
  if (innermost != nullptr) {
    innermost->caught.emplace_back(this, std::move(values));
    return;
  }
  values_ = std::move(values);
}

std::optional<std::vector<at::Tensor>> SideOutput::take() {
  std::optional<std::vector<at::Tensor>> out = std::move(values_);
  values_.reset();
  return out;
}

struct SideOutputCarrier::Record {
  bool ran = false;
  size_t block_outputs = 0;
  std::vector<std::pair<SideOutput*, size_t>> setters;  // each module's SideOutput and its value count
};

SideOutputCarrier::SideOutputCarrier() : record_(std::make_shared<Record>()) {}

RecomputedBlock SideOutputCarrier::wrap(RecomputedBlock block) const {
  return [record = record_, block = std::move(block)](const std::vector<at::Tensor>& inputs) {
    Capture capture;
    std::vector<at::Tensor> outputs;
    {
      OpenCapture open(capture);
      outputs = block(inputs);
    }
    std::vector<std::pair<SideOutput*, size_t>> setters;
    for (const auto& [side, values] : capture.caught) setters.emplace_back(side, values.size());
    if (!record->ran) {
      record->ran = true;
      record->block_outputs = outputs.size();
      record->setters = setters;
    } else if (setters != record->setters || outputs.size() != record->block_outputs) {
      throw Error(TRIAX_ERROR_RUNTIME, "side outputs: the block returned " + std::to_string(outputs.size()) +
                                           " outputs and set " + std::to_string(setters.size()) +
                                           " side outputs when run again, " + std::to_string(record->block_outputs) +
                                           " and " + std::to_string(record->setters.size()) + " the first time");
    }
    for (auto& [side, values] : capture.caught) outputs.insert(outputs.end(), values.begin(), values.end());
    return outputs;
  };
}

std::vector<at::Tensor> SideOutputCarrier::deliver(std::vector<at::Tensor> outputs) const {
  size_t expected = record_->block_outputs;
  for (const auto& setter : record_->setters) expected += setter.second;
  if (!record_->ran || outputs.size() != expected)
    throw Error(TRIAX_ERROR_RUNTIME, "side outputs: " + std::to_string(outputs.size()) + " outputs to deliver, " +
                                         std::to_string(expected) + " expected");
  auto next = outputs.begin() + static_cast<std::ptrdiff_t>(record_->block_outputs);
  for (const auto& [side, count] : record_->setters) {
    side->set(std::vector<at::Tensor>(next, next + static_cast<std::ptrdiff_t>(count)));
    next += static_cast<std::ptrdiff_t>(count);
  }
  outputs.resize(record_->block_outputs);
  return outputs;
}

}  // namespace triax
