// Token datasets: the datatrove file layout and its refusals, sample windows, the seeded
// permutation, the weighted interleaving and its bound, nanoset config keys.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "data_test_support.hpp"
#include "triax/data/mixture_schedule.hpp"
#include "triax/data/nanoset_config.hpp"
#include "triax/data/sample_permutation.hpp"
#include "triax/data/token_file.hpp"
#include "triax/data/token_folder.hpp"
#include "triax/error.hpp"

namespace triax::data {
namespace {

using namespace test;

// ---- one token file -------------------------------------------------------------------------

TEST(TokenFile, ReadsUint16AndUint32TokensWithIndexAndMetadata) {
  TempFolder dir;
  write_token_file(dir / "a.ds", {1, 65535, 7, 9}, 2, {1, 4});
  write_token_file(dir / "b.ds", {70000, 3, 4000000000u}, 4);
  TokenFile a((dir / "a.ds").string(), std::nullopt);
  TokenFile b((dir / "b.ds").string(), std::nullopt);
  EXPECT_EQ(a.num_tokens(), 4);
  EXPECT_EQ(a.token_size(), 2);
  EXPECT_EQ(a.num_documents(), 2);
  EXPECT_EQ(a.tokenizer(), "test-tokenizer");
  EXPECT_EQ(b.token_size(), 4);  // from the metadata
  std::vector<int64_t> out(3);
  a.copy(1, 3, out.data());
  EXPECT_EQ(out, (std::vector<int64_t>{65535, 7, 9}));
  b.copy(0, 3, out.data());
  EXPECT_EQ(out, (std::vector<int64_t>{70000, 3, 4000000000LL}));
}

TEST(TokenFile, WithoutMetadataTheConfiguredTokenSizeApplies) {
  TempFolder dir;
  write_token_file(dir / "a.ds", {5, 6}, 4, {}, /*with_metadata=*/false);
  EXPECT_EQ(TokenFile((dir / "a.ds").string(), 4).num_tokens(), 2);
  // datatrove's default is uint16: the index then tells that the file holds something else.
  EXPECT_NE(error_of([&] { TokenFile((dir / "a.ds").string(), std::nullopt); }).find("the index disagrees"),
            std::string::npos);
  fs::remove(dir / "a.ds.index");
  EXPECT_EQ(TokenFile((dir / "a.ds").string(), std::nullopt).num_tokens(), 4);
  write_token_file(dir / "b.ds", {5, 6}, 4);
  EXPECT_NE(error_of([&] { TokenFile((dir / "b.ds").string(), 2); }).find("token_size_in_bytes says 2"),
            std::string::npos);
}

TEST(TokenFile, RefusesEmptyAndTruncatedFiles) {
  TempFolder dir;
  write_token_file(dir / "empty.ds", {}, 2, {0});
  EXPECT_NE(
      error_of([&] { TokenFile((dir / "empty.ds").string(), std::nullopt); }).find("empty.ds: the token file is empty"),
      std::string::npos);
  write_token_file(dir / "odd.ds", {1, 2, 3}, 2, {}, false);
  fs::resize_file(dir / "odd.ds", 5);
  EXPECT_NE(error_of([&] { TokenFile((dir / "odd.ds").string(), std::nullopt); }).find("odd.ds: truncated"),
            std::string::npos);
  write_token_file(dir / "cut.ds", {1, 2, 3, 4}, 2);
  fs::resize_file(dir / "cut.ds", 6);  // a whole number of tokens, but fewer than the metadata says
  const std::string cut = error_of([&] { TokenFile((dir / "cut.ds").string(), std::nullopt); });
  EXPECT_NE(cut.find("cut.ds: truncated or mismatched: the metadata states 4 tokens"), std::string::npos) << cut;
  EXPECT_NE(error_of([&] { TokenFile((dir / "missing.ds").string(), std::nullopt); }).find("missing.ds: cannot open"),
            std::string::npos);
}

TEST(TokenFile, RefusesAnIndexThatDisagreesWithItsData) {
  TempFolder dir;
  write_token_file(dir / "short.ds", {1, 2, 3, 4}, 2, {2, 3});
  const std::string shorter = error_of([&] { TokenFile((dir / "short.ds").string(), std::nullopt); });
  EXPECT_NE(shorter.find("short.ds.index: the index disagrees with its data: the last document ends at token 3, "),
            std::string::npos)
      << shorter;
  write_token_file(dir / "back.ds", {1, 2, 3, 4}, 2, {3, 2, 4});
  EXPECT_NE(error_of([&] { TokenFile((dir / "back.ds").string(), std::nullopt); }).find("the index is corrupt"),
            std::string::npos);
  write_token_file(dir / "torn.ds", {1, 2, 3, 4}, 2, {4});
  fs::resize_file(dir / "torn.ds.index", 5);
  EXPECT_NE(error_of([&] { TokenFile((dir / "torn.ds").string(), std::nullopt); }).find("torn.ds.index: 5 bytes"),
            std::string::npos);
}

TEST(TokenFile, TokenIdsAtOrAboveTheVocabularyAreNamedWithFileAndPosition) {
  TempFolder dir;
  std::vector<uint32_t> tokens(1000, 7);
  tokens[613] = 300;
  tokens[900] = 999;
  write_token_file(dir / "big.ds", tokens, 2, {500, 1000});
  TokenFile file((dir / "big.ds").string(), std::nullopt);
  EXPECT_NO_THROW(file.check_vocabulary(1000, "model.model_config.vocab_size"));
  const std::string message = error_of([&] { file.check_vocabulary(256, "model.model_config.vocab_size"); });
  EXPECT_NE(message.find("big.ds: token id 300 at token position 613 (document 1) is not below the vocabulary size 256 "
                         "(model.model_config.vocab_size); the largest id in the file is 999"),
            std::string::npos)
      << message;
}

// ---- a folder of token files ----------------------------------------------------------------

TEST(TokenFolder, SamplesAreAdjacentWindowsOfEachFileInNameOrder) {
  TempFolder dir;
  write_token_file(dir / "b.ds", iota_tokens(7, 100));  // 2 samples of 3, 1 token left out
  write_token_file(dir / "a.ds", iota_tokens(10, 0));   // 3 samples of 3, 1 token left out
  std::ofstream(dir / "notes.txt") << "not a token file";
  TokenFolder folder(dir.path().string(), {2, std::nullopt, std::nullopt, std::nullopt});
  ASSERT_EQ(folder.num_samples(), 5);
  EXPECT_EQ(folder.num_tokens(), 17);
  const std::vector<std::vector<int64_t>> expected = {
      {0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {100, 101, 102}, {103, 104, 105}};
  for (int64_t i = 0; i < 5; ++i) {
    std::vector<int64_t> sample(3);
    folder.copy_sample(i, sample.data());
    EXPECT_EQ(sample, expected[static_cast<size_t>(i)]) << "sample " << i;
  }
  TokenFolder capped(dir.path().string(), {2, std::nullopt, 4, std::nullopt});
  EXPECT_EQ(capped.num_samples(), 4);
}

TEST(TokenFolder, RefusesMissingOrEmptyFoldersAndSequencesTooLong) {
  TempFolder dir;
  const TokenFolderOptions options{8, std::nullopt, std::nullopt, std::nullopt};
  EXPECT_NE(error_of([&] { TokenFolder((dir / "nowhere").string(), options); }).find("nowhere: no such folder"),
            std::string::npos);
  EXPECT_NE(error_of([&] { TokenFolder(dir.path().string(), options); }).find("holds no *.ds token file"),
            std::string::npos);
  write_token_file(dir / "a.ds", iota_tokens(8));
  write_token_file(dir / "b.ds", iota_tokens(5));
  const std::string message = error_of([&] { TokenFolder(dir.path().string(), options); });
  EXPECT_NE(
      message.find("a sample needs sequence_length + 1 = 9 consecutive tokens of one file, but the longest of its "
                   "2 file(s) holds 8 tokens"),
      std::string::npos)
      << message;
}

// ---- permutation and interleaving -------------------------------------------------------------

TEST(SamplePermutation, IsABijectionThatDependsOnTheKey) {
  for (int64_t size : {1, 2, 3, 7, 64, 65, 1000, 10007}) {
    SamplePermutation p(size, 42);
    std::vector<bool> seen(static_cast<size_t>(size), false);
    for (int64_t i = 0; i < size; ++i) {
      const int64_t v = p(i);
      ASSERT_TRUE(v >= 0 && v < size);
      ASSERT_FALSE(seen[static_cast<size_t>(v)]) << "size " << size;
      seen[static_cast<size_t>(v)] = true;
    }
  }
  SamplePermutation a(1000, 1), b(1000, 2);
  int same = 0, fixed = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    same += a(i) == b(i);
    fixed += a(i) == i;
  }
  EXPECT_LT(same, 20);
  EXPECT_LT(fixed, 20);
}

// Exactly: |c_i(n) - n m_i / M| < 1 for every dataset after every sample.
void expect_within_one_sample(const std::vector<double>& weights, int64_t samples) {
  MixtureSchedule schedule(weights);
  EXPECT_EQ(std::accumulate(schedule.numerators().begin(), schedule.numerators().end(), uint64_t{0}),
            MixtureSchedule::kDenominator);
  MixtureCursor cursor(schedule);
  for (int64_t n = 1; n <= samples; ++n) {
    cursor.seek(n);
    for (size_t i = 0; i < weights.size(); ++i) {
      const __int128 scaled = static_cast<__int128>(cursor.counts()[i]) * MixtureSchedule::kDenominator;
      const __int128 expected = static_cast<__int128>(n) * schedule.numerators()[i];
      const __int128 gap = scaled > expected ? scaled - expected : expected - scaled;
      ASSERT_LT(gap, static_cast<__int128>(MixtureSchedule::kDenominator))
          << "dataset " << i << " after " << n << " samples: " << cursor.counts()[i] << ", weight "
          << schedule.weight(i);
    }
  }
}

TEST(MixtureSchedule, WeightsHalfThirtyTwentyGiveTheirShareWithinOneSampleAtEveryPoint) {
  expect_within_one_sample({0.5, 0.3, 0.2}, 10000);
  MixtureSchedule schedule({0.5, 0.3, 0.2});
  MixtureCursor cursor(schedule);
  cursor.seek(10000);
  // Within one percentage point (and in fact within one sample: 0.5 * 10000 is exact).
  EXPECT_EQ(cursor.counts(), (std::vector<int64_t>{5000, 3000, 2000}));
  const std::vector<double> w = {0.5, 0.3, 0.2};
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(static_cast<double>(cursor.counts()[i]) / 10000.0, w[i], 0.01);
}

TEST(MixtureSchedule, ManySkewedWeightsStayWithinOneSample) {
  // Weights where a plain "largest deficit first" greedy overshoots by more than one sample.
  expect_within_one_sample({0.2193666969653342, 0.0024365133472493083, 0.7238005842416336, 0.002210555405255581,
                            0.007499630910484868, 0.04468601913004247},
                           20000);
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<double> weights(2 + rng() % 11);
    for (auto& w : weights) w = std::pow(std::uniform_real_distribution<double>(1e-3, 1.0)(rng), 1 + trial % 4);
    expect_within_one_sample(weights, 3000);
  }
}

TEST(MixtureSchedule, JumpsBackAndRestoresToTheSamePicks) {
  MixtureSchedule schedule({3, 1, 1});
  MixtureCursor forward(schedule);
  std::vector<size_t> picks;
  for (int64_t n = 0; n < 200000; ++n) picks.push_back(forward.pick(n).dataset);
  MixtureCursor jumping(schedule);
  for (int64_t n : {199999, 5, 70000, 65536, 65535, 0, 131072})
    EXPECT_EQ(jumping.pick(n).dataset, picks[static_cast<size_t>(n)]) << n;
  forward.seek(150000);
  MixtureCursor restored(schedule);
  restored.restore(150000, forward.counts());
  for (int64_t n = 150000; n < 150100; ++n) EXPECT_EQ(restored.pick(n).dataset, picks[static_cast<size_t>(n)]);
  std::vector<int64_t> skewed = forward.counts();
  skewed[0] += 5;
  skewed[1] -= 5;
  EXPECT_NE(error_of([&] { restored.restore(150000, skewed); }).find("were the weights changed?"), std::string::npos);
}

// ---- nanoset config ---------------------------------------------------------------------------

std::string nanoset_error(const std::string& yaml) {
  return error_of([&] { parse_nanoset_config(YAML::Load(yaml), "data_stages.1.data.dataset", "run.yaml"); });
}

TEST(NanosetConfig, ReadsNanotronKeysStrictly) {
  NanosetConfig one = parse_nanoset_config(YAML::Load("{dataset_folder: /data/a}"), "d", "f");
  EXPECT_EQ(one.dataset_folder, (std::vector<std::string>{"/data/a"}));
  EXPECT_FALSE(one.dataset_weights);
  NanosetConfig all = parse_nanoset_config(
      YAML::Load("{dataset_folder: [a, b], dataset_weights: [0.7, 0.3], dataset_read_path: [c, d], tokenizer_name: t, "
                 "vocab_size: 512, token_size_in_bytes: 4, return_positions: false, skip_in_stream: true, "
                 "pad_samples_to_global_batch_size: false, dataset_max_tokens: [100, 200], shuffle_files: true, "
                 "use_old_brrr_dataloader: false}"),
      "d", "f");
  EXPECT_EQ(*all.dataset_weights, (std::vector<double>{0.7, 0.3}));
  EXPECT_EQ(*all.token_size_in_bytes, 4);
  EXPECT_EQ(*all.dataset_max_tokens, (std::vector<int64_t>{100, 200}));
  EXPECT_EQ(all.read_folder(0), "a");  // the read path does not exist: the folder is used
}

TEST(NanosetConfig, ErrorsNameTheKey) {
  EXPECT_NE(nanoset_error("{dataset_folder: [a, b], dataset_weights: [1]}")
                .find("run.yaml: data_stages.1.data.dataset.dataset_weights"),
            std::string::npos);
  EXPECT_NE(
      nanoset_error("{dataset_folder: [a, b], dataset_weights: [1]}").find("has 1 entry, but dataset_folder has 2"),
      std::string::npos);
  EXPECT_NE(nanoset_error("{dataset_folder: [a, b], dataset_weights: [1, 0]}").find("weight 1 is 0"),
            std::string::npos);
  EXPECT_NE(nanoset_error("{dataset_folder: [a, b], dataset_weights: [-1, 2]}").find("must be positive"),
            std::string::npos);
  EXPECT_NE(nanoset_error("{dataset_folder: a, dataset_wieghts: [1]}").find("dataset.dataset_wieghts"),
            std::string::npos);
  EXPECT_NE(nanoset_error("{dataset_weights: [1]}").find("dataset.dataset_folder"), std::string::npos);
  EXPECT_NE(nanoset_error("{dataset_folder: []}").find("the list is empty"), std::string::npos);
  EXPECT_NE(nanoset_error("{dataset_folder: a, token_size_in_bytes: 3}").find("expected 2"), std::string::npos);
  EXPECT_NE(nanoset_error("{dataset_folder: a, pad_samples_to_global_batch_size: true}").find("not supported"),
            std::string::npos);
  EXPECT_NE(nanoset_error("{hf_dataset_or_datasets: stas/openwebtext-10k}").find("tools/tokenize"), std::string::npos);
}

}  // namespace
}  // namespace triax::data
