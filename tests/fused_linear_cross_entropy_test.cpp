// fused_linear_cross_entropy at tp = 1 against the unfused path it replaces (the lm_head's
// at::linear, then vocab_parallel_cross_entropy): the loss and the gradients of the hidden
// states and of the weight, with a padded vocabulary, a mask, and chunks of several sizes.
// fp32 within 1e-6 relative, fp64 within 1e-12, bf16 within 1e-2; and the gradients computed in
// forward against those computed in backward, bit for bit. The tp > 1 case is in
// tensor_parallel_test.cpp. FusedLinearCrossEntropyCpu runs everywhere; ...Cuda (ctest label gpu)
// runs the CUDA kernels and skips without a GPU.
#include "triax/layers/fused_linear_cross_entropy.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kernel_test_support.hpp"
#include "live_cpu_bytes.hpp"
#include "triax/error.hpp"
#include "triax/layers/cross_entropy.hpp"
#include "triax/layers/tensor_parallel.hpp"

namespace {

struct Case {
  int64_t tokens, hidden, vocab, padded_vocab;
  bool masked;
  int64_t chunk_tokens;  // 0: automatic
};

std::string describe(const Case& c, c10::Device device, c10::ScalarType dtype) {
  return device.str() + " " + c10::toString(dtype) + " tokens " + std::to_string(c.tokens) + " hidden " +
         std::to_string(c.hidden) + " vocab " + std::to_string(c.vocab) + "/" + std::to_string(c.padded_vocab) +
         (c.masked ? " masked" : "") + " chunk " + std::to_string(c.chunk_tokens);
}

double tolerance(c10::ScalarType dtype, c10::Device device) {
  if (dtype == at::kDouble) return 1e-12;
  if (dtype == at::kFloat) return device.is_cuda() ? 1e-5 : 1e-6;
  return 1e-2;
}

using triax::kernel_testing::expect_close;

// incoming: the gradient the loss receives (the pipeline scales each micro-batch's loss).
void check(const Case& c, c10::Device device, c10::ScalarType dtype, double incoming = 1.0) {
  const std::string what = describe(c, device, dtype) + " incoming gradient " + std::to_string(incoming);
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(100 + static_cast<uint64_t>(c.vocab));
  auto double_options = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor hidden_values = at::randn({c.tokens, c.hidden}, generator, double_options).to(device, dtype);
  // Large enough logits that the softmax is far from uniform.
  const at::Tensor weight_values =
      (at::randn({c.padded_vocab, c.hidden}, generator, double_options) * (2.0 / std::sqrt(c.hidden)))
          .to(device, dtype);
  const at::Tensor labels = at::randint(c.vocab, {c.tokens}, generator, at::kLong).to(device);
  at::Tensor mask;
  if (c.masked) {
    mask = at::ones({c.tokens}, at::kFloat);
    mask.narrow(0, 1, c.tokens / 3).zero_();
    mask = mask.to(device);
  }
  const triax::TensorParallel single;

  at::Tensor rh = hidden_values.detach().requires_grad_(true), rw = weight_values.detach().requires_grad_(true);
  at::Tensor reference = triax::vocab_parallel_cross_entropy(at::linear(rh, rw), labels, mask, 0, c.vocab, single);
  (reference * incoming).backward();

  at::Tensor h = hidden_values.detach().requires_grad_(true), w = weight_values.detach().requires_grad_(true);
  at::Tensor loss = triax::fused_linear_cross_entropy(h, w, labels, mask, 0, c.vocab, single, c.chunk_tokens);
  EXPECT_EQ(loss.scalar_type(), reference.scalar_type()) << what;
  EXPECT_EQ(loss.dim(), 0) << what;
  (loss * incoming).backward();

  const double tol = tolerance(dtype, device);
  expect_close(loss, reference, tol, what + ": loss");
  expect_close(h.grad(), rh.grad(), tol, what + ": hidden gradient");
  expect_close(w.grad(), rw.grad(), tol, what + ": weight gradient");
  if (c.padded_vocab > c.vocab) {
    EXPECT_EQ(w.grad().narrow(0, c.vocab, c.padded_vocab - c.vocab).abs().max().item<double>(), 0.0)
        << what << ": padded rows take no gradient";
  }
}

// 22 tokens: chunks of 1, 5 (a short last chunk), all 22 at once, and the automatic size.
const Case kSmallCases[] = {
    {22, 12, 30, 32, true, 5},  {22, 12, 30, 32, false, 5}, {22, 12, 30, 32, true, 1},
    {22, 12, 30, 32, true, 22}, {22, 12, 30, 32, true, 0},  {22, 12, 32, 32, true, 7},
};

TEST(FusedLinearCrossEntropyCpu, MatchesUnfusedPath) {
  for (c10::ScalarType dtype : {at::kFloat, at::kDouble})
    for (const Case& c : kSmallCases) check(c, c10::Device(c10::kCPU), dtype);
}

TEST(FusedLinearCrossEntropyCpu, MatchesUnfusedPathInBfloat16) {
  check({22, 16, 30, 32, true, 5}, c10::Device(c10::kCPU), at::kBFloat16);
}

// At tp = 1 the gradients are computed in forward and scaled in backward by what the loss receives.
TEST(FusedLinearCrossEntropyCpu, GradientsFollowTheLossesIncomingGradient) {
  for (c10::ScalarType dtype : {at::kFloat, at::kDouble, at::kBFloat16})
    for (double incoming : {0.37, -2.5}) check({22, 16, 30, 32, true, 5}, c10::Device(c10::kCPU), dtype, incoming);
}

TEST(FusedLinearCrossEntropyCpu, WithoutGradientsTheLossIsTheSame) {
  const triax::TensorParallel single;
  const at::Tensor h = at::randn({22, 12}), w = at::randn({30, 12}), labels = at::randint(30, {22}, at::kLong);
  const at::Tensor expected =
      triax::fused_linear_cross_entropy(h.requires_grad_(true), w, labels, {}, 0, 30, single, 5);
  at::Tensor loss;
  {
    at::NoGradGuard no_grad;
    loss = triax::fused_linear_cross_entropy(h, w, labels, {}, 0, 30, single, 5);
  }
  EXPECT_FALSE(loss.requires_grad());
  EXPECT_TRUE(at::equal(loss, expected.detach()));
}

TEST(FusedLinearCrossEntropyCpu, EveryTokenMaskedGivesZeroLossAndGradients) {
  const triax::TensorParallel single;
  at::Tensor h = at::randn({6, 4}).requires_grad_(true), w = at::randn({8, 4}).requires_grad_(true);
  at::Tensor loss = triax::fused_linear_cross_entropy(h, w, at::zeros({6}, at::kLong), at::zeros({6}), 0, 8, single, 4);
  loss.backward();
  EXPECT_EQ(loss.item<double>(), 0.0);
  EXPECT_EQ(h.grad().abs().max().item<double>(), 0.0);
  EXPECT_EQ(w.grad().abs().max().item<double>(), 0.0);
}

// An engine that runs several forwards before their backwards (AFAB with several micro-batches):
// only one forward at a time keeps gradients computed in forward (the weight's fp32-sized sum);
// the others keep what their backward needs to compute them. All give the unfused gradients.
TEST(FusedLinearCrossEntropyCpu, OneForwardAtATimeKeepsItsGradientSums) {
  const triax::TensorParallel single;
  const int64_t tokens = 8, hidden = 16, vocab = 512, sum_bytes = vocab * hidden * 4;
  const at::Tensor w_values = at::randn({vocab, hidden}, at::kDouble).to(at::kFloat);
  at::Tensor w = w_values.clone().requires_grad_(true), w_ref = w_values.clone().requires_grad_(true);
  std::vector<at::Tensor> hidden_states, labels, losses;
  for (int i = 0; i < 4; ++i) {
    hidden_states.push_back(at::randn({tokens, hidden}).requires_grad_(true));
    labels.push_back(at::randint(vocab, {tokens}, at::kLong));
  }
  std::vector<int64_t> kept;
  auto counter = std::make_shared<LiveCpuBytes>();
  auto forward = [&](int i) {
    c10::DebugInfoGuard guard(c10::DebugInfoKind::PROFILER_STATE, counter);
    const int64_t before = counter->live;
    losses.push_back(triax::fused_linear_cross_entropy(hidden_states[i], w, labels[i], {}, 0, vocab, single));
    kept.push_back(counter->live - before);
  };
  for (int i = 0; i < 3; ++i) forward(i);
  EXPECT_GE(kept[0], sum_bytes) << "the first forward keeps its gradient sums";
  EXPECT_LT(kept[1], sum_bytes) << "a second forward while the first waits for its backward";
  EXPECT_LT(kept[2], sum_bytes) << "a third one";
  for (int i = 0; i < 3; ++i) losses[i].backward();
  forward(3);
  EXPECT_GE(kept[3], sum_bytes) << "once the first backward took its sums, a forward keeps them again";
  losses[3].backward();

  for (int i = 0; i < 4; ++i) {
    at::Tensor h_ref = hidden_states[i].detach().clone().requires_grad_(true);
    triax::vocab_parallel_cross_entropy(at::linear(h_ref, w_ref), labels[i], {}, 0, vocab, single).backward();
    expect_close(hidden_states[i].grad(), h_ref.grad(), 1e-6, "hidden gradient of micro-batch " + std::to_string(i));
  }
  expect_close(w.grad(), w_ref.grad(), 1e-6, "weight gradient summed over the micro-batches");
}

TEST(FusedLinearCrossEntropyCpu, ASecondBackwardIsRefusedByName) {
  const triax::TensorParallel single;
  at::Tensor h = at::randn({6, 4}).requires_grad_(true), w = at::randn({8, 4}).requires_grad_(true);
  at::Tensor loss = triax::fused_linear_cross_entropy(h, w, at::randint(8, {6}, at::kLong), {}, 0, 8, single);
  loss.backward({}, /*retain_graph=*/true);
  try {
    loss.backward();
    ADD_FAILURE() << "a second backward went through";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("fused_linear_cross_entropy: a second backward"), std::string::npos)
        << e.what();
  }
}

TEST(FusedLinearCrossEntropyCpu, BadInputsNameTheArgument) {
  const triax::TensorParallel single;
  const at::Tensor h = at::randn({6, 4}), labels = at::zeros({6}, at::kLong);
  auto message = [&](const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& l, const at::Tensor& mask) {
    try {
      triax::fused_linear_cross_entropy(hidden, weight, l, mask, 0, 8, single);
    } catch (const triax::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(h, at::randn({8, 5}), labels, {}).find("fused_linear_cross_entropy: weight [8, 5]"),
            std::string::npos);
  EXPECT_NE(message(h, at::randn({8, 4}, at::kDouble), labels, {}).find("share one floating dtype"), std::string::npos);
  EXPECT_NE(message(h, at::randn({8, 4}), at::zeros({5}, at::kLong), {}).find("labels [5]"), std::string::npos);
  EXPECT_NE(message(h, at::randn({8, 4}), labels, at::ones({4})).find("mask [4]"), std::string::npos);
  EXPECT_NE(message(h.unsqueeze(0), at::randn({8, 4}), labels, {}).find("hidden must be [tokens, hidden]"),
            std::string::npos);
}

TEST(FusedLinearCrossEntropyCuda, MatchesUnfusedPath) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  const c10::Device cuda(c10::kCUDA, 0);
  for (c10::ScalarType dtype : {at::kFloat, at::kDouble})
    for (const Case& c : kSmallCases) check(c, cuda, dtype);
  // SmolLM-like widths: a vocabulary with 16-byte rows (the vector path) and one without, padded.
  for (c10::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    check({700, 576, 4096, 4096, true, 256}, cuda, dtype);
    check({700, 576, 4099, 4104, true, 0}, cuda, dtype);
    check({300, 960, 2053, 2056, false, 128}, cuda, dtype);
    check({700, 576, 4096, 4096, true, 256}, cuda, dtype, 0.37);
  }
}

// At tp = 1 the first pending forward computes each chunk's gradients in forward; a forward while
// it waits for its backward leaves them to backward, which computes the logits again. Both paths
// must agree bit for bit: the loss and the gradients of the hidden states and of the weight.
// (OneForwardAtATimeKeepsItsGradientSums checks which of the two paths each forward takes.)
void expect_gradients_in_forward_equal_those_in_backward(c10::Device device) {
  const triax::TensorParallel single;
  // A vocabulary in 16-byte vectors and one that is not; bf16 and fp32; chunks of 100 rows.
  for (c10::ScalarType dtype : {at::kBFloat16, at::kFloat})
    for (int64_t vocab : {int64_t{4096}, int64_t{4099}}) {
      const std::string what = device.str() + " " + c10::toString(dtype) + " vocab " + std::to_string(vocab);
      const auto options = at::TensorOptions().device(device).dtype(dtype);
      const int64_t tokens = 333, hidden = 64;
      const at::Tensor h_values = at::randn({tokens, hidden}, options);
      const at::Tensor w_values = at::randn({vocab, hidden}, options) * 0.5;
      const at::Tensor labels = at::randint(vocab, {tokens}, options.dtype(at::kLong));
      at::Tensor mask = at::ones({tokens}, options.dtype(at::kFloat));
      mask.narrow(0, 7, 50).zero_();
      std::vector<at::Tensor> h, w, losses;
      for (int i = 0; i < 2; ++i) {
        h.push_back(h_values.clone().requires_grad_(true));
        w.push_back(w_values.clone().requires_grad_(true));
        losses.push_back(triax::fused_linear_cross_entropy(h[i], w[i], labels, mask, 0, vocab, single, 100));
      }
      losses[0].backward();  // gradients computed in forward
      losses[1].backward();  // computed in backward
      EXPECT_TRUE(at::equal(losses[0], losses[1]))
          << what << ": " << losses[0].item<double>() << " against " << losses[1].item<double>();
      EXPECT_TRUE(at::equal(h[0].grad(), h[1].grad())) << what << ": hidden gradient";
      EXPECT_TRUE(at::equal(w[0].grad(), w[1].grad())) << what << ": weight gradient";
      EXPECT_GT(h[0].grad().abs().max().item<double>(), 0.0) << what;
    }
}

TEST(FusedLinearCrossEntropyCpu, GradientsInForwardEqualThoseInBackward) {
  expect_gradients_in_forward_equal_those_in_backward(c10::Device(c10::kCPU));
}

TEST(FusedLinearCrossEntropyCuda, GradientsInForwardEqualThoseInBackward) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  expect_gradients_in_forward_equal_those_in_backward(c10::Device(c10::kCUDA, 0));
}

}  // namespace
