// The amax computed by the kernels that produce an fp8 product's operands (docs/fp8.md, "The amax
// from the producer"). Fp8ProducerAmaxCpu: a record is found for the very elements recorded only
// (a reshape, not a slice, a copy or a tensor written in place), and convert_linears_to_fp8 turns
// the decoder layer's norms to recording for tensorwise fp8 products only. Fp8ProducerAmaxCuda
// (ctest label gpu, skipped without a GPU): the amaxes of the RMSNorm kernels (output, input
// gradient) and the SwiGLU kernels (output, input gradient) equal max |tensor| exactly (bf16, odd
// sizes, zeros), nothing is recorded unless asked, and a training step through norms and fp8 MLPs
// takes the recorded amaxes and gives the bits it gives without them.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/cuda.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "fp8_test_support.hpp"
#include "recorded_amax.hpp"
#include "triax/fp8.hpp"
#include "triax/init.hpp"
#include "triax/layers/fused_ops.hpp"
#include "triax/layers/norm.hpp"
#include "triax/layers/pre_norm_decoder_layer.hpp"
#include "triax/layers/rotary_qkv.hpp"
#include "triax/layers/swiglu_mlp.hpp"
#include "triax/model.hpp"
#include "triax/residual_stream.hpp"

namespace {

using triax::AmaxRecording;
using triax::fp8::recorded_amax;

using triax::fp8_testing::fp8_context;

TEST(Fp8ProducerAmaxCpu, ARecordIsFoundForTheSameElementsOnly) {
  at::Tensor y = at::randn({4, 6, 8});
  const at::Tensor slots = at::zeros({32});
  triax::fp8::record_amax(y, slots);
  EXPECT_TRUE(recorded_amax(y).is_same(slots));
  EXPECT_TRUE(recorded_amax(y.reshape({-1, 8})).is_same(slots)) << "the fp8 linear's rows of the same elements";
  EXPECT_FALSE(recorded_amax(y.narrow(0, 1, 2)).defined()) << "a slice";
  EXPECT_FALSE(recorded_amax(y.reshape({-1}).narrow(0, 0, 8 * 6 * 3)).defined()) << "the first elements only";
  EXPECT_FALSE(recorded_amax(y.transpose(1, 2)).defined()) << "not contiguous";
  EXPECT_FALSE(recorded_amax(y.clone()).defined()) << "a copy";
  y.mul_(2);
  EXPECT_FALSE(recorded_amax(y).defined()) << "written in place after the record";
}

TEST(Fp8ProducerAmaxCpu, RecordsOfFreedTensorsAreDroppedAndInferenceTensorsNotRecorded) {
  for (int i = 0; i < 5; ++i) triax::fp8::record_amax(at::randn({16}), at::zeros({32}));
  const at::Tensor kept = at::randn({16});
  triax::fp8::record_amax(kept, at::zeros({32}));
  EXPECT_EQ(triax::fp8::recorded_amax_count(), 1u) << "only the live tensor's record stays";
  at::Tensor inference;
  {
    c10::InferenceMode mode;
    inference = at::randn({16});
  }
  triax::fp8::record_amax(inference, at::zeros({32}));
  EXPECT_FALSE(recorded_amax(inference).defined());
}

struct LayerSize {
  int64_t hidden, heads, kv_heads, intermediate;
};
const LayerSize kSmallLayer{64, 4, 2, 128};
const LayerSize k1p7bLayer{2048, 32, 32, 8192};  // SmolLM-1.7B's

// A decoder layer of the SDK under a parent, so that its modules have names as in a model. Its
// matrices are drawn as a model's are (seeded, std 0.02): the layers allocate them uninitialised,
// and a step through memory the allocator handed back from freed tensors reads NaN or Inf there
// in every run of a comparison (issue 50).
struct OneLayer : torch::nn::Module {
  std::shared_ptr<triax::PreNormDecoderLayer> layer;
  explicit OneLayer(const triax::ModelContext& context, const LayerSize& size = kSmallLayer) {
    triax::AttentionShape shape;
    shape.hidden_size = size.hidden, shape.heads = size.heads, shape.kv_heads = size.kv_heads;
    auto mlp = triax::UnaryModule::of(std::make_shared<triax::SwiGluMlp>(size.hidden, size.intermediate, context));
    layer = register_module("layer", std::make_shared<triax::PreNormDecoderLayer>(shape, 1e-5, mlp, context));
    std::vector<triax::NamedParameter> parameters = triax::collect_parameters(*layer);
    triax::init_scaled(parameters, triax::ScaledInitMethod{}, /*seed=*/10, {"o_proj.weight", "down_proj.weight"});
  }
};

// The layer the CUDA steps below run holds the same finite weights at each construction, its
// matrices of std 0.02, not whatever its allocations held before (zeros or a freed tensor's bits).
TEST(Fp8ProducerAmaxCpu, TheTestLayersWeightsAreDrawnNotLeftUninitialised) {
  const triax::ModelContext context = fp8_context("min_gemm_size: 0");
  OneLayer first(context), second(context);
  const std::vector<at::Tensor> a = first.parameters(), b = second.parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(at::isfinite(a[i]).all().item<bool>()) << "parameter " << i;
    EXPECT_TRUE(at::equal(a[i], b[i])) << "parameter " << i;
    if (a[i].dim() >= 2) {
      EXPECT_NEAR(a[i].std().item<double>(), 0.02, 0.002) << "parameter " << i;
    }
  }
}

// What {input_layernorm, post_attention_layernorm} record after converting with `yaml`.
std::vector<AmaxRecording> norms_recording(const std::string& yaml) {
  const triax::ModelContext context = fp8_context(yaml);
  OneLayer model(context);
  triax::convert_linears_to_fp8(model, context);
  return {model.layer->input_layernorm->amax_recording(), model.layer->post_attention_layernorm->amax_recording()};
}

// A norm's output is the input of the block after it; its input gradient the output gradient of
// the block whose output its add takes (o_proj's for post_attention_layernorm, the MLP's for the
// next layer's input_layernorm).
TEST(Fp8ProducerAmaxCpu, TheNormsAroundTensorwiseFp8ProductsRecordTheirAmaxes) {
  using R = AmaxRecording;
  EXPECT_EQ(norms_recording("min_gemm_size: 0"),
            (std::vector<R>{R::OutputAndInputGradient, R::OutputAndInputGradient}));
  EXPECT_EQ(norms_recording("linears: ['*.mlp.*']"), (std::vector<R>{R::InputGradient, R::Output}));
  EXPECT_EQ(norms_recording("linears: ['*.o_proj']"), (std::vector<R>{R::Output, R::InputGradient}));
  EXPECT_EQ(norms_recording("recipe: rowwise\nmin_gemm_size: 0"), (std::vector<R>{R::None, R::None}));
  EXPECT_EQ(norms_recording("{}"), (std::vector<R>{R::None, R::None})) << "every linear below min_gemm_size";
}

// The rotary kernel's backward writes the gradient of qkv_proj's output: it records that amax for
// a tensorwise fp8 qkv_proj only.
TEST(Fp8ProducerAmaxCpu, TheRotaryBackwardRecordsForATensorwiseFp8QkvProjection) {
  auto records = [](const std::string& yaml) {
    const triax::ModelContext context = fp8_context(yaml);
    OneLayer model(context);
    triax::convert_linears_to_fp8(model, context);
    return model.layer->self_attn->records_qkv_gradient_amax();
  };
  EXPECT_TRUE(records("min_gemm_size: 0"));
  EXPECT_TRUE(records("linears: ['*.qkv_proj']"));
  EXPECT_FALSE(records("linears: ['*.mlp.*', '*.o_proj']"));
  EXPECT_FALSE(records("recipe: rowwise\nmin_gemm_size: 0"));
  EXPECT_FALSE(records("{}")) << "every linear below min_gemm_size";
}

// ---- CUDA -------------------------------------------------------------------------------------

class Fp8ProducerAmaxCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  }
};

const auto kBf16 = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);

// max |t| in fp32 against the max of the slots recorded for t, bit for bit.
void expect_recorded_amax(const at::Tensor& t, const std::string& what) {
  const at::Tensor slots = recorded_amax(t);
  ASSERT_TRUE(slots.defined()) << what << ": no amax recorded";
  const float expected = t.abs().max().to(at::kFloat).item<float>();
  EXPECT_EQ(slots.max().item<float>(), expected) << what;
}

// [rows, hidden]: vectorised rows, rows of a length no vector divides, and zeros.
struct Shape {
  int64_t rows, cols;
  bool zeros;
};
const Shape kShapes[] = {{37, 2048, false}, {5, 1003, false}, {3, 4096, true}, {130, 24, false}};

at::Tensor input(const Shape& s, int64_t cols) {
  return s.zeros ? at::zeros({s.rows, cols}, kBf16) : at::randn({s.rows, cols}, kBf16) * 3;
}

TEST_F(Fp8ProducerAmaxCuda, RmsNormRecordsItsOutputsAmaxOnlyWhenAsked) {
  for (const Shape& s : kShapes) {
    const std::string what = std::to_string(s.rows) + " x " + std::to_string(s.cols);
    const at::Tensor x = input(s, s.cols), residual = at::randn({s.rows, s.cols}, kBf16);
    const at::Tensor weight = at::randn({s.cols}, kBf16);
    expect_recorded_amax(triax::rms_norm(x, weight, 1e-5, AmaxRecording::Output), "rms_norm " + what);
    expect_recorded_amax(triax::add_rms_norm(x, residual, weight, 1e-5, AmaxRecording::Output).second,
                         "add_rms_norm " + what);
    EXPECT_FALSE(recorded_amax(triax::rms_norm(x, weight, 1e-5)).defined()) << what;
    EXPECT_FALSE(recorded_amax(triax::add_rms_norm(x, residual, weight, 1e-5).second).defined()) << what;
  }
}

// The gradient of x and y of add_rms_norm (one tensor), and of x of rms_norm.
TEST_F(Fp8ProducerAmaxCuda, RmsNormBackwardRecordsItsInputGradientsAmaxOnlyWhenAsked) {
  for (const Shape& s : kShapes) {
    const std::string what = std::to_string(s.rows) + " x " + std::to_string(s.cols);
    const at::Tensor x = at::randn({s.rows, s.cols}, kBf16).requires_grad_(true);
    const at::Tensor residual = at::randn({s.rows, s.cols}, kBf16).requires_grad_(true);
    const at::Tensor weight = at::randn({s.cols}, kBf16);
    const at::Tensor grad_norm = input(s, s.cols), grad_sum = input(s, s.cols);
    for (AmaxRecording recording : {AmaxRecording::InputGradient, AmaxRecording::OutputAndInputGradient}) {
      const auto [sum, normed] = triax::add_rms_norm(x, residual, weight, 1e-5, recording);
      const auto grads = torch::autograd::grad({sum, normed}, {x, residual}, {grad_sum, grad_norm});
      expect_recorded_amax(grads[0], "add_rms_norm gradient " + what);
      const at::Tensor alone = triax::rms_norm(x, weight, 1e-5, recording);
      expect_recorded_amax(torch::autograd::grad({alone}, {x}, {grad_norm})[0], "rms_norm gradient " + what);
    }
    EXPECT_FALSE(recorded_amax(triax::add_rms_norm(x, residual, weight, 1e-5, AmaxRecording::InputGradient).second)
                     .defined())
        << what << ": the output is not recorded";
    const at::Tensor plain = triax::rms_norm(x, weight, 1e-5, AmaxRecording::Output);
    EXPECT_FALSE(recorded_amax(torch::autograd::grad({plain}, {x}, {grad_norm})[0]).defined()) << what;
  }
}

TEST_F(Fp8ProducerAmaxCuda, SwigluRecordsItsOutputsAndItsGradientsAmax) {
  for (const Shape& s : kShapes) {
    const std::string what = std::to_string(s.rows) + " x " + std::to_string(s.cols);
    const at::Tensor gate_up = input(s, 2 * s.cols).requires_grad_(true);
    const at::Tensor y = triax::swiglu_halves(gate_up, AmaxRecording::OutputAndInputGradient);
    expect_recorded_amax(y, "swiglu output " + what);
    const at::Tensor grad_y = input(s, s.cols);
    const at::Tensor grad = torch::autograd::grad({y}, {gate_up}, {grad_y})[0];
    expect_recorded_amax(grad, "swiglu gradient " + what);

    const at::Tensor plain = triax::swiglu_halves(gate_up, AmaxRecording::Output);
    EXPECT_FALSE(recorded_amax(torch::autograd::grad({plain}, {gate_up}, {grad_y})[0]).defined()) << what;
    EXPECT_FALSE(recorded_amax(triax::swiglu_halves(gate_up.detach())).defined()) << what;
  }
}

// Two blocks of an add-and-norm and an fp8 SwiGLU MLP, the first MLP's output added in front of
// the second norm, as the MLP's output of one decoder layer before the next layer's norm.
struct TwoBlocks : torch::nn::Module {
  std::shared_ptr<triax::RMSNorm> norm[2];
  std::shared_ptr<triax::SwiGluMlp> mlp[2];
  explicit TwoBlocks(const triax::ModelContext& context) {
    at::manual_seed(7);
    for (int b = 0; b < 2; ++b) {
      const std::string name = std::to_string(b);
      norm[b] = register_module("norm" + name, std::make_shared<triax::RMSNorm>(256, 1e-5, context.device, context.dtype));
      mlp[b] = register_module("mlp" + name, std::make_shared<triax::SwiGluMlp>(256, 512, context));
      at::NoGradGuard no_grad;
      for (auto& p : mlp[b]->parameters()) p.normal_(0, 0.05);
      norm[b]->weight.normal_(1, 0.1);
    }
    triax::convert_linears_to_fp8(*this, context);
    norm[0]->record_amax(AmaxRecording::Output);
    norm[1]->record_amax(AmaxRecording::OutputAndInputGradient);
  }
};

struct Step {
  at::Tensor loss;
  std::vector<at::Tensor> grads;  // the inputs', then every parameter's
  size_t amax_uses;
};

// One forward and backward; `producer_amax` false: TRIAX_FP8_PRODUCER_AMAX=0 for it.
Step step(TwoBlocks& model, bool producer_amax) {
  if (!producer_amax) setenv("TRIAX_FP8_PRODUCER_AMAX", "0", 1);
  at::manual_seed(8);
  const at::Tensor x = at::randn({2, 72, 256}, kBf16).requires_grad_(true);
  const at::Tensor pending = at::randn({2, 72, 256}, kBf16).requires_grad_(true);
  const at::Tensor probe = at::randn({2, 72, 256}, kBf16.dtype(at::kFloat));
  const size_t uses = triax::fp8::recorded_amax_uses();
  model.zero_grad();
  const auto [h, normed] = model.norm[0]->forward_after_add(x, pending);
  const auto [h2, normed2] = model.norm[1]->forward_after_add(h, model.mlp[0]->forward(normed));
  const at::Tensor loss = (model.mlp[1]->forward(normed2).to(at::kFloat) * probe).sum() + h2.to(at::kFloat).sum();
  loss.backward();
  unsetenv("TRIAX_FP8_PRODUCER_AMAX");
  Step s{loss.detach(), {x.grad(), pending.grad()}, triax::fp8::recorded_amax_uses() - uses};
  for (const auto& p : model.parameters()) s.grads.push_back(p.grad().clone());
  return s;
}

// The amax is exact either way and the scale comes from it by the same arithmetic: the step with
// the producers' amaxes has the bits of the step with the fp8 products' own amax passes.
TEST_F(Fp8ProducerAmaxCuda, AnFp8StepTakesTheProducersAmaxesAndKeepsItsBits) {
  TwoBlocks model(fp8_context("min_gemm_size: 0", at::kCUDA, at::kBFloat16));
  const Step own = step(model, false), fused = step(model, true);
  EXPECT_EQ(own.amax_uses, 0u);
  // Each MLP: gate_up's input (the norm) and output gradient (SwiGLU), down's input (SwiGLU);
  // the first MLP's down: its output gradient (the second norm's backward).
  EXPECT_EQ(fused.amax_uses, 7u);
  EXPECT_TRUE(at::equal(fused.loss, own.loss)) << fused.loss.item<float>() << " against " << own.loss.item<float>();
  ASSERT_EQ(fused.grads.size(), own.grads.size());
  for (size_t i = 0; i < own.grads.size(); ++i) {
    ASSERT_TRUE(own.grads[i].defined() && fused.grads[i].defined()) << "gradient " << i;
    EXPECT_TRUE(at::equal(fused.grads[i], own.grads[i])) << "gradient " << i;
  }
}

// The gradient of qkv that the rotary kernel's backward writes (q and k heads rotated back, v
// heads copied), in 16-byte vectors (head_dim 64) and element by element (head_dim 6).
TEST_F(Fp8ProducerAmaxCuda, RotaryQkvBackwardRecordsTheGradientsAmaxOnlyWhenAsked) {
  const std::vector<int64_t> shapes[] = {{2, 37, 3, 5, 64}, {1, 11, 4, 3, 6}};
  for (const std::vector<int64_t>& shape : shapes) {
    const std::string what = "qkv head_dim " + std::to_string(shape[4]);
    const at::Tensor qkv = at::randn(shape, kBf16).requires_grad_(true);
    const at::Tensor cos = at::randn({shape[1], shape[4]}, kBf16), sin = at::randn({shape[1], shape[4]}, kBf16);
    for (bool record : {true, false}) {
      const auto [q, k, v] = triax::rotary_qkv(qkv, cos, sin, record);
      const auto grads =
          torch::autograd::grad({q, k, v}, {qkv}, {at::randn_like(q) * 3, at::randn_like(k), at::randn_like(v)});
      if (record)
        expect_recorded_amax(grads[0], what);
      else
        EXPECT_FALSE(recorded_amax(grads[0]).defined()) << what;
    }
    const auto [q, k, v] = triax::rotary_qkv(qkv, cos, sin, true);
    const auto grads = torch::autograd::grad({q, v}, {qkv}, {at::randn_like(q), at::randn_like(v) * 5});
    expect_recorded_amax(grads[0], what + ", k unused (its part zeros)");
  }
}

bool finite(const at::Tensor& t) { return at::isfinite(t).all().item<bool>(); }

struct LayerStep {
  at::Tensor loss;
  std::vector<at::Tensor> grads;  // the inputs', then every parameter's
  size_t found, own;              // quantises with a producer's amax, with an amax pass of their own
};

// One decoder layer's forward and backward with a pending add coming in and its MLP output added
// by a norm after it (the next layer's input_layernorm), the weights cast as at a step's start.
LayerStep layer_step(OneLayer& model, const LayerSize& size, int64_t tokens, bool producer_amax) {
  if (!producer_amax) setenv("TRIAX_FP8_PRODUCER_AMAX", "0", 1);
  at::manual_seed(9);
  const int64_t head_dim = size.hidden / size.heads;
  const at::Tensor x = at::randn({1, tokens, size.hidden}, kBf16).requires_grad_(true);
  const at::Tensor pending = at::randn({1, tokens, size.hidden}, kBf16).requires_grad_(true);
  const at::Tensor cos = at::rand({tokens, head_dim}, kBf16), sin = at::rand({tokens, head_dim}, kBf16);
  const at::Tensor probe = at::randn({1, tokens, size.hidden}, kBf16.dtype(at::kFloat));
  triax::RMSNorm next_norm(size.hidden, 1e-5, at::kCUDA, at::kBFloat16);
  next_norm.record_amax(AmaxRecording::InputGradient);
  triax::fp8_weights_changed();
  model.zero_grad();
  const size_t found = triax::fp8::recorded_amax_uses(), own = triax::fp8::recorded_amax_misses();
  const triax::ResidualStream out = model.layer->forward_stream({x, pending}, {cos, sin});
  const auto [h, normed] = next_norm.forward_after_add(out.residual, out.pending);
  const at::Tensor loss = (normed.to(at::kFloat) * probe).sum() + h.to(at::kFloat).sum();
  loss.backward();
  unsetenv("TRIAX_FP8_PRODUCER_AMAX");
  LayerStep s{loss.detach(), {x.grad(), pending.grad()}, triax::fp8::recorded_amax_uses() - found,
              triax::fp8::recorded_amax_misses() - own};
  for (const auto& p : model.parameters()) s.grads.push_back(p.grad().clone());
  return s;
}

// Of a layer's 12 tensorwise quantises (x and W of 4 products, gy of 4) the producers' amaxes serve
// 7: the inputs of q/k/v (input_layernorm), gate/up (post_attention_layernorm) and down (SwiGLU),
// the output gradients of q/k/v (the rotary backward), o (post_attention_layernorm's backward),
// gate/up (SwiGLU's backward) and down (the next norm's backward). Own passes: the 4 weights and
// o_proj's input (attention's output). At a small layer and at SmolLM-1.7B's (2,048 tokens).
// The gradients equal those of the run without records bit for bit where that run repeats itself
// bit for bit; cuDNN's attention backward may sum in another order from run to run (PyTorch counts
// it as nondeterministic), and then the records may move a gradient by no more than a repeat does.
TEST_F(Fp8ProducerAmaxCuda, ADecoderLayerTakesSevenOfItsTwelveAmaxesFromProducers) {
  for (const LayerSize& size : {kSmallLayer, k1p7bLayer}) {
    const std::string what = "hidden " + std::to_string(size.hidden);
    const triax::ModelContext context = fp8_context("min_gemm_size: 0", at::kCUDA, at::kBFloat16);
    OneLayer model(context, size);
    triax::convert_linears_to_fp8(model, context);
    const int64_t tokens = size.hidden == kSmallLayer.hidden ? 72 : 2048;
    const LayerStep own = layer_step(model, size, tokens, false), fused = layer_step(model, size, tokens, true);
    const LayerStep repeat = layer_step(model, size, tokens, false);
    EXPECT_EQ(own.found, 0u) << what;
    EXPECT_EQ(own.own, 12u) << what;
    EXPECT_EQ(fused.found, 7u) << what;
    EXPECT_EQ(fused.own, 5u) << what;
    ASSERT_TRUE(finite(own.loss)) << what << ": the loss without records (are the layer's weights drawn?)";
    EXPECT_TRUE(at::equal(fused.loss, own.loss)) << what;
    ASSERT_EQ(fused.grads.size(), own.grads.size());
    for (size_t i = 0; i < own.grads.size(); ++i) {
      ASSERT_TRUE(own.grads[i].defined() && fused.grads[i].defined()) << what << ", gradient " << i;
      const double noise = (repeat.grads[i].to(at::kFloat) - own.grads[i].to(at::kFloat)).abs().max().item<double>();
      const double moved = (fused.grads[i].to(at::kFloat) - own.grads[i].to(at::kFloat)).abs().max().item<double>();
      if (noise == 0.0)
        EXPECT_TRUE(at::equal(fused.grads[i], own.grads[i])) << what << ", gradient " << i;
      else
        EXPECT_LE(moved, 4.0 * noise) << what << ", gradient " << i << ": the repeat moved it by " << noise
                                      << " (all finite: own " << finite(own.grads[i]) << ", with records "
                                      << finite(fused.grads[i]) << ", repeat " << finite(repeat.grads[i]) << ")";
    }
  }
}

}  // namespace
