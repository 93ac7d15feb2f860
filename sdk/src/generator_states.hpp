// The random generators' states a re-run block needs (recompute.cpp, zero3_layer.cpp): both run
// a block once without autograd and again in backward, and the second run must draw the same
// numbers as the first.
#pragma once

#include <ATen/ATen.h>

#include <mutex>
#include <utility>
#include <vector>

namespace triax {

// The default random generators a block may draw from: the CPU's and those of the inputs'
// devices. Their states are taken before the forward and put back for the re-run, so that a
// block with dropout draws the same numbers twice.
class GeneratorStates {
 public:
  static GeneratorStates capture(const std::vector<at::Tensor>& inputs) {
    GeneratorStates states;
    states.add(c10::Device(c10::kCPU));
    for (const at::Tensor& input : inputs)
      if (input.defined() && !input.device().is_cpu()) states.add(input.device());
    return states;
  }

  // The states of the same generators now.
  GeneratorStates current() const {
    GeneratorStates now;
    for (const auto& [device, state] : states_) now.add(device);
    return now;
  }

  void apply() const {
    for (const auto& [device, state] : states_) {
      at::Generator generator = at::globalContext().defaultGenerator(device);
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(state);
    }
  }

 private:
  void add(c10::Device device) {
    for (const auto& [known, state] : states_)
      if (known == device) return;
    at::Generator generator = at::globalContext().defaultGenerator(device);
    std::lock_guard<std::mutex> lock(generator.mutex());
    states_.emplace_back(device, generator.get_state());
  }

  std::vector<std::pair<c10::Device, at::Tensor>> states_;
};

// Sets captured generator states for its lifetime, then restores those it found: the re-run
// draws the forward's numbers, and the generators go on afterwards as if it had not run.
class ReplayedGenerators {
 public:
  explicit ReplayedGenerators(const GeneratorStates& captured) : found_(captured.current()) { captured.apply(); }
  ~ReplayedGenerators() { found_.apply(); }
  ReplayedGenerators(const ReplayedGenerators&) = delete;
  ReplayedGenerators& operator=(const ReplayedGenerators&) = delete;

 private:
  GeneratorStates found_;
};

}  // namespace triax
