// Generation (triax generate's core): the sampling rules on their own, and the generation loop
// over the Llama plugin's inference cache through the host's ModelInstance: cached tokens equal
// the uncached reference (the whole sequence recomputed for every token), a batch of prompts of
// different lengths equals each prompt alone, sampling is reproducible with a seed and changes
// with another, top-k = 1 is greedy, EOS stops a sequence, padded vocabulary rows are never
// chosen, and prompts too long for the model's context are refused by name.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "test_plugin_registry.hpp"
#include "triax/core/comm/communicator.hpp"
#include "triax/generate/generation_model.hpp"
#include "triax/generate/generator.hpp"
#include "triax/generate/sampling.hpp"

namespace {

using triax::generation::GenerationOptions;
using triax::generation::GenerationResult;
using triax::generation::SamplingOptions;
using triax::test::error_of;
using Prompts = std::vector<std::vector<int64_t>>;

at::Tensor random_logits(int64_t rows, int64_t vocab, uint64_t seed) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn({rows, vocab}, generator) * 3.0;
}

std::vector<int64_t> as_vector(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kLong).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

TEST(GenerationSampling, TopKOneIsGreedy) {
  const at::Tensor logits = random_logits(16, 50, 3);
  triax::generation::SamplingStreams streams(7, 16);
  std::vector<int64_t> rows(16);
  for (int64_t r = 0; r < 16; ++r) rows[static_cast<size_t>(r)] = r;
  for (double temperature : {0.5, 1.0, 4.0}) {
    SamplingOptions top1{temperature, 1, 1.0};
    EXPECT_EQ(as_vector(triax::generation::choose_tokens(logits, top1, streams.next(rows))),
              as_vector(logits.argmax(-1)));
  }
}

TEST(GenerationSampling, DrawsFollowTheDistributionInsideTheCuts) {
  // Three likely tokens with probabilities 0.5, 0.3, 0.2 and a tail of unlikely ones.
  at::Tensor logits = at::full({1, 10}, -30.0);
  logits[0][4] = std::log(0.5);
  logits[0][1] = std::log(0.3);
  logits[0][7] = std::log(0.2);
  triax::generation::SamplingStreams streams(11, 1);
  std::vector<int> counts(10, 0), top2(10, 0), nucleus(10, 0);
  const int draws = 4000;
  for (int i = 0; i < draws; ++i) {
    ++counts[as_vector(triax::generation::choose_tokens(logits, {1.0, 0, 1.0}, streams.next({0})))[0]];
    ++top2[as_vector(triax::generation::choose_tokens(logits, {1.0, 2, 1.0}, streams.next({0})))[0]];
    ++nucleus[as_vector(triax::generation::choose_tokens(logits, {1.0, 0, 0.75}, streams.next({0})))[0]];
  }
  EXPECT_NEAR(counts[4] / double(draws), 0.5, 0.03);
  EXPECT_NEAR(counts[1] / double(draws), 0.3, 0.03);
  EXPECT_NEAR(counts[7] / double(draws), 0.2, 0.03);
  // Top-2 renormalises 0.5 : 0.3; the 0.75 nucleus keeps the same two (0.5 < 0.75 <= 0.8).
  EXPECT_EQ(top2[7], 0);
  EXPECT_NEAR(top2[4] / double(draws), 0.5 / 0.8, 0.03);
  EXPECT_EQ(nucleus[7], 0);
  EXPECT_NEAR(nucleus[4] / double(draws), 0.5 / 0.8, 0.03);
}

TEST(GenerationSampling, RefusesImpossibleOptionsByFlag) {
  EXPECT_NE(error_of([] { SamplingOptions{-1.0, 0, 1.0}.validate(); }).find("--temperature"), std::string::npos);
  EXPECT_NE(error_of([] { SamplingOptions{1.0, -2, 1.0}.validate(); }).find("--top-k"), std::string::npos);
  EXPECT_NE(error_of([] { SamplingOptions{1.0, 0, 0.0}.validate(); }).find("--top-p"), std::string::npos);
}

// A tiny Llama with random weights: vocab 61 padded to 64 (padding rows give logit 0, which the
// generator must never choose), 32 positions.
class GenerationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_.plugin = "llama";
    spec_.origin = "test";
    spec_.model_config_yaml =
        "hidden_size: 32\nnum_attention_heads: 4\nnum_key_value_heads: 2\nintermediate_size: 48\n"
        "num_hidden_layers: 2\nvocab_size: 61\nmax_position_embeddings: 32\ntie_word_embeddings: false\n";
    spec_.init_method_yaml = "{std: 0.3}";
    spec_.make_vocab_size_divisible_by = 8;
    spec_.seed = 5;
    host_ = std::make_unique<triax::HostServices>(alone_);
    model_ = triax::generation::create_generation_model(triax::testing::test_plugin_registry(), spec_, alone_, *host_,
                                                        c10::Device(c10::kCPU), "float32");
    options_.vocab_size = 61;
    options_.max_new_tokens = 10;
  }

  GenerationResult run(const Prompts& prompts, const GenerationOptions& options) {
    return triax::generation::generate(*model_, alone_, c10::Device(c10::kCPU), prompts, options);
  }
  std::vector<std::vector<int64_t>> tokens(const Prompts& prompts, const GenerationOptions& options) {
    std::vector<std::vector<int64_t>> out;
    for (const auto& s : run(prompts, options).sequences) out.push_back(s.tokens);
    return out;
  }

  triax::generation::GenerationModelSpec spec_;
  triax::SingleProcessCommunicator alone_;
  std::unique_ptr<triax::HostServices> host_;
  std::unique_ptr<triax::ModelInstance> model_;
  GenerationOptions options_;
  const Prompts ragged_ = {{3, 14, 15, 9, 2, 6, 5}, {27}, {18, 28, 18, 28}, {45, 9, 33, 1, 60, 7, 12}};
};

TEST_F(GenerationTest, CachedEqualsUncached) {
  GenerationOptions uncached = options_;
  uncached.use_cache = false;
  const auto greedy = tokens(ragged_, options_);
  EXPECT_EQ(greedy, tokens(ragged_, uncached));
  for (const auto& s : greedy) {
    ASSERT_EQ(s.size(), 10u);
    for (int64_t t : s) EXPECT_LT(t, 61) << "a padded vocabulary row was chosen";
  }
  GenerationOptions sampled = options_;
  sampled.sampling = {0.9, 20, 0.95};
  uncached.sampling = sampled.sampling;
  EXPECT_EQ(tokens(ragged_, sampled), tokens(ragged_, uncached));
}

TEST_F(GenerationTest, RaggedBatchEqualsEachPromptAlone) {
  const auto batch = tokens(ragged_, options_);
  for (size_t i = 0; i < ragged_.size(); ++i) EXPECT_EQ(batch[i], tokens({ragged_[i]}, options_)[0]) << "prompt " << i;
  // Sampling: row 0's stream does not depend on the rows beside it.
  GenerationOptions sampled = options_;
  sampled.sampling = {1.0, 0, 1.0};
  EXPECT_EQ(tokens(ragged_, sampled)[0], tokens({ragged_[0]}, sampled)[0]);
}

TEST_F(GenerationTest, SamplingIsReproducibleWithASeedAndChangesWithAnother) {
  GenerationOptions sampled = options_;
  sampled.sampling = {1.5, 0, 1.0};
  sampled.max_new_tokens = 16;
  const auto first = tokens(ragged_, sampled);
  EXPECT_EQ(first, tokens(ragged_, sampled));
  sampled.seed = 43;
  EXPECT_NE(first, tokens(ragged_, sampled));
  EXPECT_NE(first, tokens(ragged_, options_)) << "sampling at temperature 1.5 gave the greedy tokens";
}

TEST_F(GenerationTest, TopKOneEqualsGreedy) {
  GenerationOptions top1 = options_;
  top1.sampling = {1.0, 1, 1.0};
  EXPECT_EQ(tokens(ragged_, top1), tokens(ragged_, options_));
}

TEST_F(GenerationTest, EosStopsOnlyItsSequence) {
  const auto free_run = tokens(ragged_, options_);
  GenerationOptions stopping = options_;
  stopping.eos = {free_run[1][2]};  // prompt 1's third token
  const GenerationResult result = run(ragged_, stopping);
  for (size_t i = 0; i < ragged_.size(); ++i) {
    const auto& s = result.sequences[i];
    auto first = std::find(free_run[i].begin(), free_run[i].end(), stopping.eos[0]);
    const size_t expected = first == free_run[i].end() ? free_run[i].size() : size_t(first - free_run[i].begin()) + 1;
    EXPECT_EQ(s.tokens, std::vector<int64_t>(free_run[i].begin(), free_run[i].begin() + expected)) << "prompt " << i;
    EXPECT_EQ(s.stopped_at_eos, first != free_run[i].end());
  }
  EXPECT_LE(result.sequences[1].tokens.size(), 3u);
}

// Each free-running sequence up to and with its first token in `eos`, as a stopping run gives it.
Prompts cut_at_eos(const Prompts& free_run, const std::vector<int64_t>& eos) {
  Prompts out;
  for (const auto& s : free_run) {
    const auto first = std::find_first_of(s.begin(), s.end(), eos.begin(), eos.end());
    out.emplace_back(s.begin(), first == s.end() ? s.end() : first + 1);
  }
  return out;
}

// Every row ends through EOS, each at its own step, greedy and sampled: the decoding step the host
// queues before it reads that the last row has ended brings only dropped tokens, so the tokens, the
// stop reasons and the count of new tokens are the uncached path's (which reads every token before
// its next step) and the free run's cut at EOS.
TEST_F(GenerationTest, RowsEndingAtEosAtTheirOwnStepsKeepTheirTokens) {
  for (const SamplingOptions sampling : {SamplingOptions{}, SamplingOptions{0.9, 20, 0.95}}) {
    GenerationOptions options = options_;
    options.sampling = sampling;
    const auto free_run = tokens(ragged_, options);
    options.eos = {free_run[0][1], free_run[1][3], free_run[2][5], free_run[3][4]};
    GenerationOptions uncached = options;
    uncached.use_cache = false;
    const GenerationResult cached = run(ragged_, options);
    const GenerationResult reference = run(ragged_, uncached);
    const Prompts expected = cut_at_eos(free_run, options.eos);
    int64_t new_tokens = 0;
    size_t longest = 0;
    for (size_t i = 0; i < ragged_.size(); ++i) {
      longest = std::max(longest, expected[i].size());
      EXPECT_EQ(cached.sequences[i].tokens, expected[i]) << "prompt " << i;
      EXPECT_EQ(cached.sequences[i].tokens, reference.sequences[i].tokens) << "prompt " << i;
      const bool ends_in_eos = std::count(options.eos.begin(), options.eos.end(), expected[i].back()) > 0;
      EXPECT_EQ(cached.sequences[i].stopped_at_eos, ends_in_eos) << "prompt " << i;
      EXPECT_EQ(cached.sequences[i].stopped_at_eos, reference.sequences[i].stopped_at_eos) << "prompt " << i;
      new_tokens += static_cast<int64_t>(expected[i].size());
    }
    EXPECT_LE(cached.sequences[0].tokens.size(), 2u);
    EXPECT_EQ(cached.stats.new_tokens, new_tokens);
    EXPECT_EQ(reference.stats.new_tokens, new_tokens);
    // The longest row's tokens need longest - 1 decoding steps (the prefill gives the first);
    // the cached loop runs at most one more, the uncached one none.
    EXPECT_EQ(reference.stats.decode_steps, static_cast<int64_t>(longest) - 1);
    EXPECT_GE(cached.stats.decode_steps, static_cast<int64_t>(longest) - 1);
    EXPECT_LE(cached.stats.decode_steps, static_cast<int64_t>(longest));
  }
}

// One and two new tokens: none or one decoding step, with and without a row ending at EOS in the
// prefill's token, and no step beyond them.
TEST_F(GenerationTest, OneAndTwoNewTokensWithAndWithoutEos) {
  const auto free_run = tokens(ragged_, options_);
  for (int64_t max_new : {1, 2}) {
    for (bool stop_row_1 : {false, true}) {
      GenerationOptions options = options_;
      options.max_new_tokens = max_new;
      if (stop_row_1) options.eos = {free_run[1][0]};
      const GenerationResult result = run(ragged_, options);
      int64_t new_tokens = 0;
      size_t longest = 0;
      for (size_t i = 0; i < ragged_.size(); ++i) {
        const auto& s = result.sequences[i];
        longest = std::max(longest, s.tokens.size());
        const bool stops_first = stop_row_1 && free_run[i][0] == free_run[1][0];
        const size_t length = stops_first ? 1 : static_cast<size_t>(max_new);
        EXPECT_EQ(s.tokens, std::vector<int64_t>(free_run[i].begin(), free_run[i].begin() + length))
            << "prompt " << i << ", max_new_tokens " << max_new;
        if (i == 1 || !stop_row_1) {
          EXPECT_EQ(s.stopped_at_eos, stop_row_1) << "prompt " << i;
        }
        new_tokens += static_cast<int64_t>(s.tokens.size());
      }
      EXPECT_EQ(result.stats.new_tokens, new_tokens);
      // The first token comes from the prefill: the longest row's others need a step each.
      EXPECT_EQ(result.stats.decode_steps, static_cast<int64_t>(longest) - 1) << "max_new_tokens " << max_new;
    }
  }
}

TEST_F(GenerationTest, RefusesPromptsTheContextCannotHold) {
  const std::vector<int64_t> long_prompt(40, 5);
  const std::string too_long = error_of([&] { run({{1, 2}, long_prompt}, options_); });
  EXPECT_NE(too_long.find("prompt 1 has 40 tokens, more than the model's context holds"), std::string::npos)
      << too_long;
  EXPECT_NE(too_long.find("32 positions"), std::string::npos) << too_long;
  const std::string no_room = error_of([&] { run({std::vector<int64_t>(30, 5)}, options_); });
  EXPECT_NE(no_room.find("prompt 0 has 30 tokens; with 10 new tokens (--max-new-tokens)"), std::string::npos)
      << no_room;
  const std::string outside = error_of([&] { run({{1, 61}}, options_); });
  EXPECT_NE(outside.find("prompt 0 holds token id 61, outside the model's vocabulary [0, 61)"), std::string::npos)
      << outside;
}

}  // namespace
