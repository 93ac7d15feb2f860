// Activation recomputation: the SDK's recompute() on small blocks (gradients into inputs and
// parameters, the block run again in backward, random draws replayed, non-differentiable outputs,
// bad arguments) and in the Llama decoder layers (parallelism.recompute_layer): the same loss and
// gradients as without, and only each layer's input kept between forward and backward, counted
// through c10's memory-reporting hook. Selective recomputation of the MLP activation
// (linear_of_recomputed_activation, parallelism.recompute_mlp_activation): the same bits, and the
// activation's output not kept. Tensor parallelism: tests/tensor_parallel_test.cpp and the
// parity matrix (parity.dp2_tp2_sp_recompute_mlp_activation).
#include "triax/layers/recompute.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "live_cpu_bytes.hpp"
#include "llama_model.hpp"
#include "triax/config_reader.hpp"
#include "triax/error.hpp"
#include "triax/layers/recomputed_activation.hpp"

namespace {

at::Tensor seeded(std::vector<int64_t> shape, uint64_t seed, c10::ScalarType dtype = at::kDouble) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn(shape, generator, at::TensorOptions().dtype(at::kDouble)).to(dtype);
}

at::Tensor leaf(const at::Tensor& t) { return t.detach().clone().requires_grad_(true); }

// max |a - b| / max |b|
double relative_error(const at::Tensor& a, const at::Tensor& b) {
  const double scale = std::max(b.abs().max().item<double>(), 1e-30);
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>() / scale;
}

// ---- recompute() on small blocks ----------------------------------------------------------

// y = tanh(x W) * scale, with `scale` an input that takes no gradient; counts its runs.
struct ToyBlock {
  at::Tensor weight;
  int runs = 0;
  at::Tensor operator()(const std::vector<at::Tensor>& in) {
    ++runs;
    return at::tanh(at::matmul(in[0], weight)) * in[1];
  }
};

TEST(Recompute, GradientsReachInputsAndParametersAndTheBlockRunsAgainInBackward) {
  ToyBlock block{leaf(seeded({6, 5}, 1))};
  at::Tensor x = leaf(seeded({4, 6}, 2));
  at::Tensor scale = seeded({5}, 3);
  at::Tensor upstream = seeded({4, 5}, 4);

  at::Tensor y =
      triax::recompute([&](const std::vector<at::Tensor>& in) { return block(in); }, {x, scale}, {block.weight});
  EXPECT_EQ(block.runs, 1);
  ASSERT_TRUE(y.requires_grad());
  (y * upstream).sum().backward();
  EXPECT_EQ(block.runs, 2) << "the block must run again in backward";
  at::Tensor x_grad = x.grad().clone(), weight_grad = block.weight.grad().clone();

  // The same block with autograd keeping its activations.
  at::Tensor x_ref = leaf(x), weight_ref = leaf(block.weight);
  at::Tensor y_ref = at::tanh(at::matmul(x_ref, weight_ref)) * scale;
  (y_ref * upstream).sum().backward();
  EXPECT_TRUE(at::equal(y, y_ref));
  EXPECT_LE(relative_error(x_grad, x_ref.grad()), 1e-15);
  EXPECT_LE(relative_error(weight_grad, weight_ref.grad()), 1e-15);
  EXPECT_FALSE(scale.grad().defined());
}

TEST(Recompute, ParametersOnlyStillGetGradients) {
  // No input needs a gradient (a first layer on token features): the parameters alone make the
  // output differentiable.
  ToyBlock block{leaf(seeded({6, 5}, 1))};
  at::Tensor x = seeded({4, 6}, 2);
  at::Tensor y = triax::recompute([&](const std::vector<at::Tensor>& in) { return block(in); },
                                  {x, at::ones({5}, at::kDouble)}, {block.weight});
  ASSERT_TRUE(y.requires_grad());
  y.sum().backward();
  at::Tensor weight_ref = leaf(block.weight);
  at::tanh(at::matmul(x, weight_ref)).sum().backward();
  ASSERT_TRUE(block.weight.grad().defined());
  EXPECT_LE(relative_error(block.weight.grad(), weight_ref.grad()), 1e-15);
}

TEST(Recompute, RandomDrawsAreReplayedAndTheGeneratorMovesOnAsWithout) {
  at::Tensor weight = leaf(seeded({6, 6}, 5));
  at::Tensor x = leaf(seeded({8, 6}, 6));
  auto dropout_block = [&](const std::vector<at::Tensor>& in) {
    return at::dropout(at::matmul(in[0], weight), 0.5, /*train=*/true);
  };
  at::manual_seed(11);
  at::Tensor y = triax::recompute(dropout_block, {x}, {weight});
  y.sum().backward();
  const double after = at::rand({1}).item<double>();  // the generator continues from the forward's draws
  at::Tensor x_grad = x.grad().clone(), weight_grad = weight.grad().clone();

  at::Tensor x_ref = leaf(x), weight_ref = leaf(weight);
  at::manual_seed(11);
  at::Tensor y_ref = at::dropout(at::matmul(x_ref, weight_ref), 0.5, true);
  y_ref.sum().backward();
  const double after_ref = at::rand({1}).item<double>();
  EXPECT_TRUE(at::equal(y, y_ref));
  EXPECT_TRUE(at::equal(x_grad, x_ref.grad())) << "the re-run drew other dropout masks";
  EXPECT_TRUE(at::equal(weight_grad, weight_ref.grad()));
  EXPECT_EQ(after, after_ref);
}

TEST(Recompute, SeveralOutputsAndIntegerOutputs) {
  at::Tensor weight = leaf(seeded({5, 5}, 7));
  at::Tensor x = leaf(seeded({3, 5}, 8));
  auto block = [&](const std::vector<at::Tensor>& in) {
    at::Tensor h = at::matmul(in[0], weight);
    return std::vector<at::Tensor>{h.sin(), h.cos(), h.argmax(-1)};  // argmax: like MoE routing indices
  };
  std::vector<at::Tensor> out = triax::recompute(block, {x}, {weight});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_FALSE(out[2].requires_grad());
  EXPECT_EQ(out[2].scalar_type(), at::kLong);
  (out[0].sum() + 2.0 * out[1].sum()).backward();

  at::Tensor x_ref = leaf(x), weight_ref = leaf(weight);
  at::Tensor h = at::matmul(x_ref, weight_ref);
  (h.sin().sum() + 2.0 * h.cos().sum()).backward();
  EXPECT_LE(relative_error(x.grad(), x_ref.grad()), 1e-15);
  EXPECT_LE(relative_error(weight.grad(), weight_ref.grad()), 1e-15);
}

TEST(Recompute, KeepsOnlyTheInputs) {
  // Ten element-wise steps: autograd alone keeps about ten [n] tensors; recompute keeps the input.
  const int64_t n = 1 << 16;
  at::Tensor x = leaf(seeded({n}, 9, at::kFloat));
  auto chain = [](const std::vector<at::Tensor>& in) {
    at::Tensor h = in[0];
    for (int i = 0; i < 10; ++i) h = at::sin(h) * 1.5;
    return h;
  };
  auto held_after_forward = [&](bool recomputed) {
    auto counter = std::make_shared<LiveCpuBytes>();
    c10::DebugInfoGuard guard(c10::DebugInfoKind::PROFILER_STATE, counter);
    at::Tensor y = recomputed ? triax::recompute(chain, {x}, {}) : chain({x});
    return counter->live - static_cast<int64_t>(y.nbytes());  // what the graph holds beyond the output
  };
  const int64_t kept = held_after_forward(false), recomputed = held_after_forward(true);
  const int64_t one = n * 4;
  EXPECT_GE(kept, 9 * one) << "each sin keeps its input (the first one is x, allocated before counting)";
  // Besides the input (allocated before counting), only the random generator's state (5 KiB).
  EXPECT_LT(recomputed, one / 8) << "recompute kept " << recomputed << " bytes besides its output";
}

TEST(Recompute, RefusesAnUndefinedParameterAndAnEmptyBlock) {
  at::Tensor x = leaf(seeded({2}, 1));
  try {
    triax::recompute([](const std::vector<at::Tensor>& in) { return in[0] * 2.0; }, {x}, {at::Tensor()});
    ADD_FAILURE() << "an undefined parameter was accepted";
  } catch (const triax::Error& e) {
    EXPECT_NE(std::string(e.what()).find("recompute: parameter 0 is undefined"), std::string::npos) << e.what();
  }
  EXPECT_THROW(triax::recompute(triax::RecomputedBlock(), {x}, {}), triax::Error);
}

// ---- linear_of_recomputed_activation -------------------------------------------------------

using triax::RecomputedActivation;

TEST(RecomputedActivation, EqualsThePlainCompositionBitForBit) {
  for (RecomputedActivation activation : {RecomputedActivation::SwigluHalves, RecomputedActivation::GeluTanh}) {
    for (c10::ScalarType dtype : {at::kFloat, at::kDouble, at::kBFloat16}) {
      // A weight stored [out, in] and one stored [in, out] and given transposed (GPT-2's Conv1D).
      for (bool stored_transposed : {false, true}) {
        const int64_t in = 12, out = 10;
        const int64_t width = activation == RecomputedActivation::SwigluHalves ? 2 * in : in;
        at::Tensor x = leaf(seeded({3, 5, width}, 31, dtype));
        at::Tensor stored = leaf(stored_transposed ? seeded({in, out}, 32, dtype) : seeded({out, in}, 32, dtype));
        at::Tensor upstream = seeded({3, 5, out}, 33, dtype);
        auto weight_of = [&](const at::Tensor& w) { return stored_transposed ? w.t() : w; };
        at::Tensor y = triax::linear_of_recomputed_activation(activation, x, weight_of(stored));
        (y * upstream).sum().backward();

        at::Tensor x_ref = leaf(x), stored_ref = leaf(stored);
        at::Tensor y_ref = at::linear(triax::apply_activation(activation, x_ref), weight_of(stored_ref));
        (y_ref * upstream).sum().backward();
        const std::string where = std::string(activation == RecomputedActivation::SwigluHalves ? "swiglu " : "gelu ") +
                                  c10::toString(dtype) + (stored_transposed ? " [in, out]" : " [out, in]");
        EXPECT_TRUE(at::equal(y, y_ref)) << where;
        ASSERT_TRUE(x.grad().defined() && stored.grad().defined()) << where;
        EXPECT_TRUE(at::equal(x.grad(), x_ref.grad())) << where << ": " << relative_error(x.grad(), x_ref.grad());
        EXPECT_TRUE(at::equal(stored.grad(), stored_ref.grad()))
            << where << ": " << relative_error(stored.grad(), stored_ref.grad());
        EXPECT_GT(stored.grad().abs().max().item<double>(), 0.0) << where;
      }
    }
  }
}

TEST(RecomputedActivation, KeepsTheInputButNotTheActivation) {
  const int64_t rows = 256, in = 128, out = 16;
  at::Tensor weight = leaf(seeded({out, in}, 34, at::kFloat));
  auto held_after_forward = [&](bool recomputed) {
    at::Tensor x = leaf(seeded({rows, 2 * in}, 35, at::kFloat));  // allocated before counting
    auto counter = std::make_shared<LiveCpuBytes>();
    c10::DebugInfoGuard guard(c10::DebugInfoKind::PROFILER_STATE, counter);
    at::Tensor y =
        recomputed ? triax::linear_of_recomputed_activation(RecomputedActivation::SwigluHalves, x, weight)
                   : at::linear(triax::apply_activation(RecomputedActivation::SwigluHalves, x), weight);
    return counter->live - static_cast<int64_t>(y.nbytes());
  };
  const int64_t activation_bytes = rows * in * 4;
  EXPECT_GE(held_after_forward(false), activation_bytes) << "the plain composition keeps silu(gate) * up";
  EXPECT_LT(held_after_forward(true), activation_bytes / 8) << "only x and the weight, allocated before, are kept";
}

TEST(RecomputedActivation, NamesAShapeThatDoesNotFeedTheWeight) {
  try {
    triax::linear_of_recomputed_activation(RecomputedActivation::SwigluHalves, at::zeros({4, 10}), at::zeros({3, 6}));
    ADD_FAILURE() << "[4, 10] was accepted for a [3, 6] weight";
  } catch (const triax::Error& e) {
    EXPECT_NE(std::string(e.what()).find("x [4, 10] does not feed weight [3, 6]"), std::string::npos) << e.what();
  }
}

// ---- the Llama decoder layers -------------------------------------------------------------

// hidden 32, 4 heads of 8, 2 kv heads, ffn 64, vocab 60 (padded to 64).
std::string llama_yaml(int layers) {
  return "hidden_size: 32\nnum_attention_heads: 4\nnum_key_value_heads: 2\nintermediate_size: 64\n"
         "num_hidden_layers: " +
         std::to_string(layers) +
         "\nvocab_size: 60\nmax_position_embeddings: 64\nrms_norm_eps: 1.0e-5\ntie_word_embeddings: true\n";
}

// recompute_count: with recompute, the first this many layers (0: all).
std::shared_ptr<triax::llama::LlamaModel> build_llama(int layers, c10::ScalarType dtype, bool recompute,
                                                      int64_t recompute_count = 0, bool recompute_activation = false) {
  triax::ModelContext context;
  context.dtype = dtype;
  context.first_block = 0;
  context.last_block = layers + 2;
  context.seed = 1234;
  context.init_method = YAML::Load("{std: 0.2}");  // large enough that every layer matters
  context.make_vocab_size_divisible_by = 16;
  context.recompute_layer = recompute;
  context.recompute_layer_count = recompute_count;
  context.recompute_mlp_activation = recompute_activation;
  triax::ConfigReader reader = triax::ConfigReader::from_text(llama_yaml(layers), "model.model_config");
  return triax::llama::LlamaModel::create(reader, context);
}

constexpr int64_t kBatch = 4, kSeq = 32;

triax::StageInput llama_input(uint64_t seed) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  triax::StageInput input;
  input.input_ids = at::randint(60, {kBatch, kSeq}, generator, at::kLong);
  input.label_ids = at::randint(60, {kBatch, kSeq}, generator, at::kLong);
  input.label_mask = at::ones({kBatch, kSeq}, at::kFloat);
  input.label_mask[1][5].fill_(0.0);
  return input;
}

struct LossAndGradients {
  at::Tensor loss;
  std::map<std::string, at::Tensor> gradients;
};

LossAndGradients loss_and_gradients(triax::llama::LlamaModel& model, const triax::StageInput& input) {
  LossAndGradients out;
  at::Tensor loss = model.forward(input).loss;
  loss.backward();
  out.loss = loss.detach();
  for (const triax::NamedParameter& p : model.parameter_table()) out.gradients[p.name] = p.tensor.grad();
  return out;
}

TEST(RecomputeLlama, SameLossAndGradientsAsWithout) {
  for (c10::ScalarType dtype : {at::kFloat, at::kDouble, at::kBFloat16}) {
    const triax::StageInput input = llama_input(77);
    auto plain = build_llama(3, dtype, false);
    auto recomputed = build_llama(3, dtype, true);
    LossAndGradients expected = loss_and_gradients(*plain, input);
    LossAndGradients actual = loss_and_gradients(*recomputed, input);
    const std::string where = c10::toString(dtype);
    EXPECT_TRUE(at::equal(actual.loss, expected.loss)) << where;
    ASSERT_EQ(actual.gradients.size(), expected.gradients.size());
    for (const auto& [name, grad] : expected.gradients) {
      ASSERT_TRUE(grad.defined()) << where << " " << name;
      ASSERT_TRUE(actual.gradients[name].defined()) << where << " " << name << ": no gradient with recomputation";
      ASSERT_GT(grad.abs().max().item<double>(), 0.0) << where << " " << name;
      // The same operations on the same values, in the same order: equal to the bit.
      EXPECT_TRUE(at::equal(actual.gradients[name], grad))
          << where << " " << name << ": relative error " << relative_error(actual.gradients[name], grad);
    }
  }
}

TEST(RecomputeLlama, AFewLayersGiveTheSameLossAndGradients) {
  const triax::StageInput input = llama_input(80);
  LossAndGradients expected = loss_and_gradients(*build_llama(3, at::kFloat, false), input);
  LossAndGradients actual = loss_and_gradients(*build_llama(3, at::kFloat, true, 1), input);
  EXPECT_TRUE(at::equal(actual.loss, expected.loss));
  for (const auto& [name, grad] : expected.gradients) {
    ASSERT_TRUE(actual.gradients[name].defined()) << name;
    EXPECT_TRUE(at::equal(actual.gradients[name], grad)) << name;
  }
}

TEST(RecomputeLlama, RecomputedMlpActivationGivesTheSameLossAndGradients) {
  for (c10::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    // Alone, and inside layers recomputed whole (the first of three).
    for (bool whole_layers : {false, true}) {
      const triax::StageInput input = llama_input(81);
      LossAndGradients expected = loss_and_gradients(*build_llama(3, dtype, false), input);
      LossAndGradients actual = loss_and_gradients(*build_llama(3, dtype, whole_layers, 1, true), input);
      const std::string where = std::string(c10::toString(dtype)) + (whole_layers ? " with recompute_layer" : "");
      EXPECT_TRUE(at::equal(actual.loss, expected.loss)) << where;
      for (const auto& [name, grad] : expected.gradients) {
        ASSERT_TRUE(actual.gradients[name].defined()) << where << " " << name;
        EXPECT_TRUE(at::equal(actual.gradients[name], grad))
            << where << " " << name << ": relative error " << relative_error(actual.gradients[name], grad);
      }
    }
  }
}

TEST(RecomputeLlama, PipelineStageInputGetsTheSameGradient) {
  // A stage without the embedding: the gradient sent back to the previous stage.
  auto stage = [](bool recompute) {
    triax::ModelContext context;
    context.dtype = at::kDouble;
    context.pp_rank = 1;
    context.pp_size = 2;
    context.first_block = 2;  // layers 1, 2 and the head
    context.last_block = 5;
    context.seed = 1234;
    context.init_method = YAML::Load("{std: 0.2}");
    context.make_vocab_size_divisible_by = 16;
    context.recompute_layer = recompute;
    triax::ConfigReader reader = triax::ConfigReader::from_text(llama_yaml(3), "model.model_config");
    return triax::llama::LlamaModel::create(reader, context);
  };
  at::Tensor hidden = seeded({kBatch, kSeq, 32}, 21);
  at::Tensor grads[2];
  for (bool recompute : {false, true}) {
    triax::StageInput input = llama_input(78);
    input.hidden_in = leaf(hidden);
    stage(recompute)->forward(input).loss.backward();
    grads[recompute] = input.hidden_in.grad();
  }
  ASSERT_TRUE(grads[1].defined());
  EXPECT_TRUE(at::equal(grads[1], grads[0])) << "relative error " << relative_error(grads[1], grads[0]);
}

TEST(RecomputeLlama, KeepsOneHiddenStatePerLayer) {
  // What the graph holds after forward, per layer: the difference between 4 and 2 layers, halved,
  // so that the embedding and the head cancel out.
  auto held_after_forward = [](int layers, bool recompute, int64_t count = 0, bool recompute_activation = false) {
    auto model = build_llama(layers, at::kFloat, recompute, count, recompute_activation);
    const triax::StageInput input = llama_input(79);
    auto counter = std::make_shared<LiveCpuBytes>();
    c10::DebugInfoGuard guard(c10::DebugInfoKind::PROFILER_STATE, counter);
    at::Tensor loss = model->forward(input).loss;
    return counter->live;
  };
  const int64_t hidden_state = kBatch * kSeq * 32 * 4;  // one [batch, seq, hidden] fp32 tensor
  const int64_t kept = (held_after_forward(4, false) - held_after_forward(2, false)) / 2;
  const int64_t recomputed = (held_after_forward(4, true) - held_after_forward(2, true)) / 2;
  std::cout << "bytes held per layer after forward: " << kept << " kept, " << recomputed << " recomputed ("
            << hidden_state << " per hidden state)\n";
  // Its input, and the random generator's state (5 KiB) in case the layer draws numbers.
  EXPECT_LT(recomputed, 2 * hidden_state) << "a recomputed layer should keep only its input";
  EXPECT_GE(kept, 8 * hidden_state) << "the layer without recomputation keeps its activations";
  // recompute_layer_count 2 of 4: two layers keep their activations, two only their input.
  const int64_t two_recomputed = held_after_forward(4, true, 2);
  const int64_t per_layer_saving = kept - recomputed;
  EXPECT_NEAR(static_cast<double>(held_after_forward(4, false) - two_recomputed), 2.0 * per_layer_saving,
              0.05 * per_layer_saving);
  EXPECT_NEAR(static_cast<double>(two_recomputed - held_after_forward(4, true)), 2.0 * per_layer_saving,
              0.05 * per_layer_saving);
}

TEST(RecomputeLlama, RecomputedMlpActivationIsNotKept) {
  auto held_per_layer = [](bool recompute_activation) {
    auto held = [&](int layers) {
      auto model = build_llama(layers, at::kFloat, false, 0, recompute_activation);
      const triax::StageInput input = llama_input(82);
      auto counter = std::make_shared<LiveCpuBytes>();
      c10::DebugInfoGuard guard(c10::DebugInfoKind::PROFILER_STATE, counter);
      at::Tensor loss = model->forward(input).loss;
      return counter->live;
    };
    return (held(4) - held(2)) / 2;
  };
  const int64_t ffn_wide = kBatch * kSeq * 64 * 4;  // one [batch, seq, ffn] fp32 tensor
  const int64_t kept = held_per_layer(false), recomputed = held_per_layer(true);
  std::cout << "bytes held per layer after forward: " << kept << " kept, " << recomputed
            << " with the MLP activation recomputed (" << ffn_wide << " per [batch, seq, ffn] tensor)\n";
  // The CPU composition keeps silu(gate), for the product's backward, and silu(gate) * up, for
  // down_proj's; recomputed, neither. (The CUDA kernel keeps only gate_up: there the product alone.)
  EXPECT_EQ(kept - recomputed, 2 * ffn_wide);
}

}  // namespace
