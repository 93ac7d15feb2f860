// Token datasets: the datatrove file layout and its refusals, sample windows, the seeded
// permutation, the weighted interleaving and its bound, nanoset config keys, data stages,
// data-parallel slices, prefetching, and the checkpointable position.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <set>
#include <thread>

#include "triax/core/config.hpp"
#include "triax/core/data/batch_prefetcher.hpp"
#include "triax/core/data/mixture_schedule.hpp"
#include "triax/core/data/nanoset_config.hpp"
#include "triax/core/data/sample_permutation.hpp"
#include "triax/core/data/token_file.hpp"
#include "triax/core/data/token_folder.hpp"
#include "triax/core/data/training_data.hpp"
#include "triax/error.hpp"

namespace triax::data {
namespace {

namespace fs = std::filesystem;

class TempFolder {
 public:
  TempFolder() {
    static std::atomic<int> counter{0};
    path_ =
        fs::temp_directory_path() / ("triax_data_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~TempFolder() { fs::remove_all(path_); }
  fs::path operator/(const std::string& name) const { return path_ / name; }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Writes NAME.ds (+ .index and .metadata unless told not to) as datatrove does.
void write_token_file(const fs::path& ds, const std::vector<uint32_t>& tokens, int token_size = 2,
                      std::vector<uint64_t> doc_ends = {}, bool with_metadata = true,
                      const std::string& tokenizer = "test-tokenizer") {
  fs::create_directories(ds.parent_path());
  std::ofstream out(ds, std::ios::binary);
  for (uint32_t t : tokens) {
    if (token_size == 2) {
      const auto v = static_cast<uint16_t>(t);
      out.write(reinterpret_cast<const char*>(&v), 2);
    } else {
      out.write(reinterpret_cast<const char*>(&t), 4);
    }
  }
  if (doc_ends.empty()) doc_ends = {tokens.size()};
  std::ofstream index(ds.string() + ".index", std::ios::binary);
  index.write(reinterpret_cast<const char*>(doc_ends.data()), static_cast<std::streamsize>(doc_ends.size() * 8));
  if (with_metadata)
    std::ofstream(ds.string() + ".metadata") << tokenizer << "|" << token_size << "\n"
                                             << tokens.size() << "\n"
                                             << tokens.size() << " T";
}

std::vector<uint32_t> iota_tokens(size_t count, uint32_t start = 0) {
  std::vector<uint32_t> tokens(count);
  std::iota(tokens.begin(), tokens.end(), start);
  return tokens;
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

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

// ---- a run's data -----------------------------------------------------------------------------

// Token t of sample s in folder d is d * 10000 + s * (L + 1) + t, so a sample names itself.
constexpr int64_t kSequence = 7;
void write_dataset(const fs::path& folder, int dataset, int64_t samples, int files = 2) {
  const int64_t per_file = (samples + files - 1) / files;
  for (int f = 0, s = 0; f < files && s < samples; ++f) {
    const int64_t n = std::min<int64_t>(per_file, samples - s);
    write_token_file(folder / ("part_" + std::to_string(f) + ".ds"),
                     iota_tokens(static_cast<size_t>(n * (kSequence + 1)),
                                 static_cast<uint32_t>(dataset * 10000 + s * (kSequence + 1))),
                     4);
    s += static_cast<int>(n);
  }
}
int dataset_of(const at::Tensor& row) { return static_cast<int>(row[0].item<int64_t>() / 10000); }
int64_t sample_of(const at::Tensor& row) { return (row[0].item<int64_t>() % 10000) / (kSequence + 1); }

TrainConfig run_config(const std::string& stages, int64_t train_steps = 20) {
  const std::string yaml = R"(
model: {model_config: {vocab_size: 40000}, init_method: {std: 0.02}}
tokens: {sequence_length: 7, micro_batch_size: 2, batch_accumulation_per_replica: 3, train_steps: )" +
                           std::to_string(train_steps) + R"(}
optimizer: {learning_rate_scheduler: {learning_rate: 0.001}}
data_stages: )" + stages;
  return parse_train_config(YAML::Load(yaml), "run.yaml");
}

BatchLayout layout(int64_t dp_rank = 0, int64_t dp_size = 1) { return {kSequence, 2, 3, dp_rank, dp_size}; }

TEST(TrainingData, RowsHoldTheSamplesTheMixtureNames) {
  TempFolder dir;
  write_dataset(dir / "a", 1, 50);
  write_dataset(dir / "b", 2, 30, 3);
  const TrainConfig config =
      run_config("[{name: s, start_training_step: 1, data: {seed: 5, dataset: {dataset_folder: [" +
                 (dir / "a").string() + ", " + (dir / "b").string() + "], dataset_weights: [0.6, 0.4]}}}]");
  TrainingData data(config, 40000, layout());
  const at::Tensor rows = data.samples(0, 60);
  std::set<std::pair<int, int64_t>> seen;
  for (int64_t r = 0; r < 60; ++r) {
    const at::Tensor row = rows[r];
    const int d = dataset_of(row);
    // The row is the sample's window: consecutive ids.
    EXPECT_TRUE(at::equal(row, at::arange(row[0].item<int64_t>(), row[0].item<int64_t>() + kSequence + 1)));
    seen.insert({d, sample_of(row)});
  }
  // 36 of a (its first epoch: no repeat), 24 of b (30 per epoch: no repeat).
  EXPECT_EQ(seen.size(), 60u);
  const DataLoaderState state = data.state(10);  // 10 steps x 6 samples
  EXPECT_EQ(state.stages[0].datasets[0].consumed_samples, 36);
  EXPECT_EQ(state.stages[0].datasets[1].consumed_samples, 24);
  EXPECT_EQ(state.stages[0].datasets[1].consumed_tokens, 24 * kSequence);
  EXPECT_TRUE(at::equal(data.samples(17, 3), rows.narrow(0, 17, 3)));  // a pure function of the index
}

TEST(TrainingData, AnExhaustedDatasetWrapsIntoANewlyShuffledEpoch) {
  TempFolder dir;
  write_dataset(dir / "a", 1, 24);
  const TrainConfig config = run_config(
      "[{name: s, start_training_step: 1, data: {seed: 9, dataset: {dataset_folder: " + (dir / "a").string() + "}}}]");
  TrainingData data(config, 40000, layout());
  const at::Tensor rows = data.samples(0, 72);
  std::vector<int64_t> epochs[3];
  for (int64_t r = 0; r < 72; ++r) epochs[r / 24].push_back(sample_of(rows[r]));
  for (auto& epoch : epochs) {
    std::vector<int64_t> sorted = epoch;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, [] {
      std::vector<int64_t> all(24);
      std::iota(all.begin(), all.end(), 0);
      return all;
    }());
  }
  EXPECT_NE(epochs[0], epochs[1]);
  EXPECT_NE(epochs[1], epochs[2]);
  EXPECT_EQ(data.state(4).stages[0].datasets[0].epoch, 0);  // 24 samples: the first epoch exactly
  EXPECT_EQ(data.state(5).stages[0].datasets[0].epoch, 1);
}

TEST(TrainingData, DataParallelRanksReadDisjointSlicesOfEachStep) {
  TempFolder dir;
  write_dataset(dir / "a", 1, 200);
  const TrainConfig config = run_config(
      "[{name: s, start_training_step: 1, data: {seed: 1, dataset: {dataset_folder: " + (dir / "a").string() + "}}}]");
  TrainingData rank0(config, 40000, layout(0, 2));
  TrainingData rank1(config, 40000, layout(1, 2));
  TrainingData single(config, 40000, layout());
  for (int64_t step = 1; step <= 4; ++step) {
    const at::Tensor a = rank0.step_samples(step);
    const at::Tensor b = rank1.step_samples(step);
    ASSERT_EQ(a.size(0), 6);
    // global numbers (step - 1) * 12 + dp_rank * 6 + micro_batch * 2 + i
    EXPECT_TRUE(at::equal(a, single.samples((step - 1) * 12, 6)));
    EXPECT_TRUE(at::equal(b, single.samples((step - 1) * 12 + 6, 6)));
    std::set<int64_t> ids;
    for (int64_t r = 0; r < 6; ++r) ids.insert({sample_of(a[r]), sample_of(b[r])});
    EXPECT_EQ(ids.size(), 12u);
  }
}

TEST(TrainingData, StagesSwitchMixturesAtTheirStartStep) {
  TempFolder dir;
  write_dataset(dir / "a", 1, 100);
  write_dataset(dir / "b", 2, 100);
  const TrainConfig config = run_config(
      "[{name: first, start_training_step: 1, data: {seed: 1, dataset: {dataset_folder: " + (dir / "a").string() +
      "}}}, {name: second, start_training_step: 4, data: {seed: 1, dataset: {dataset_folder: " + (dir / "b").string() +
      "}}}, {name: third, start_training_step: 6, data: {dataset: null, seed: 3}}]");
  TrainingData data(config, 40000, layout());
  EXPECT_EQ(data.stage_index(3), 0u);
  EXPECT_EQ(data.stage_index(4), 1u);
  for (int64_t step = 1; step <= 5; ++step) {
    const at::Tensor batch = data.step_samples(step);
    for (int64_t r = 0; r < batch.size(0); ++r) EXPECT_EQ(dataset_of(batch[r]), step < 4 ? 1 : 2) << "step " << step;
  }
  EXPECT_LT(data.step_samples(6).max().item<int64_t>(), 40000);  // the synthetic stream
  // The second stage numbers its samples from its own start: its first is dataset b's first pick.
  TrainConfig only_b = run_config(
      "[{name: x, start_training_step: 1, data: {seed: 1, dataset: {dataset_folder: " + (dir / "b").string() + "}}}]");
  TrainingData b(only_b, 40000, layout());
  EXPECT_TRUE(at::equal(data.samples(18, 12), b.samples(0, 12)));
  const DataLoaderState state = data.state(7);
  EXPECT_EQ(state.stages[0].consumed_samples, 18);
  EXPECT_EQ(state.stages[1].consumed_samples, 12);
  EXPECT_EQ(state.stages[2].consumed_samples, 12);
  EXPECT_EQ(state.consumed_samples, 42);
}

TEST(TrainingData, ARestoredPositionContinuesWithExactlyTheNextSamples) {
  TempFolder dir;
  write_dataset(dir / "a", 1, 40);
  write_dataset(dir / "b", 2, 13);
  const std::string stages = "[{name: s, start_training_step: 1, data: {seed: 4, dataset: {dataset_folder: [" +
                             (dir / "a").string() + ", " + (dir / "b").string() + "], dataset_weights: [2, 1]}}}]";
  const TrainConfig config = run_config(stages, 30);
  TrainingData first(config, 40000, layout());
  std::vector<at::Tensor> batches;
  for (int64_t step = 1; step <= 30; ++step) batches.push_back(first.step_samples(step));
  const DataLoaderState saved = first.state(12);
  EXPECT_EQ(saved.stages[0].datasets[1].epoch, 1);  // b (13 samples) wrapped: 24 of its samples by step 12

  TrainingData resumed(config, 40000, layout());
  resumed.restore(saved);
  for (int64_t step = 13; step <= 30; ++step)
    EXPECT_TRUE(at::equal(resumed.step_samples(step), batches[static_cast<size_t>(step - 1)])) << "step " << step;
  EXPECT_TRUE(resumed.state(30) == first.state(30));

  // A checkpoint that does not fit the config is refused.
  const TrainConfig reweighted =
      run_config("[{name: s, start_training_step: 1, data: {seed: 4, dataset: {dataset_folder: [" +
                     (dir / "a").string() + ", " + (dir / "b").string() + "], dataset_weights: [1, 1]}}}]",
                 30);
  TrainingData other(reweighted, 40000, layout());
  EXPECT_NE(error_of([&] { other.restore(saved); }).find("were the weights changed?"), std::string::npos);
  DataLoaderState renamed = saved;
  renamed.stages[0].name = "t";
  EXPECT_NE(error_of([&] { resumed.restore(renamed); }).find("is 't' in the checkpoint, 's' in the config"),
            std::string::npos);
  TrainingData bigger_batch(config, 40000, {kSequence, 4, 3, 0, 1});
  EXPECT_NE(error_of([&] { bigger_batch.restore(saved); }).find("batch size"), std::string::npos);
}

TEST(TrainingData, BadInputStopsBeforeTrainingNamingKeyAndFile) {
  TempFolder dir;
  write_dataset(dir / "a", 1, 10);
  const auto error_for = [&](const std::string& dataset, int64_t vocab = 40000) {
    return error_of([&] {
      TrainingData(run_config("[{name: s, start_training_step: 1, data: {dataset: " + dataset + "}}]"), vocab,
                   layout());
    });
  };
  const std::string a = (dir / "a").string();
  std::string e = error_for("{dataset_folder: [" + a + ", " + (dir / "gone").string() + "]}");
  EXPECT_NE(
      e.find("run.yaml: data_stages.0.data.dataset.dataset_folder.1: " + (dir / "gone").string() + ": no such folder"),
      std::string::npos)
      << e;
  e = error_for("{dataset_folder: " + a + "}", 10000);
  EXPECT_NE(e.find("run.yaml: data_stages.0.data.dataset.dataset_folder: "), std::string::npos) << e;
  EXPECT_NE(e.find("part_0.ds: token id 10000 at token position 0"), std::string::npos) << e;
  e = error_for("{dataset_folder: [" + a + ", " + a + "], dataset_weights: [1, 2, 3]}");
  EXPECT_NE(e.find("data_stages.0.data.dataset.dataset_weights"), std::string::npos) << e;
  e = error_for("{dataset_folder: " + a + ", vocab_size: 32000}");
  EXPECT_NE(e.find("vocab_size (32000) differs from model.model_config.vocab_size (40000)"), std::string::npos) << e;
  write_token_file(dir / "short" / "x.ds", iota_tokens(5));
  e = error_for("{dataset_folder: " + (dir / "short").string() + "}");
  EXPECT_NE(e.find("the sequence is longer than this dataset can serve"), std::string::npos) << e;
  write_token_file(dir / "other" / "x.ds", iota_tokens(50), 2, {}, true, "another-tokenizer");
  e = error_for("{dataset_folder: [" + (dir / "other").string() + "], tokenizer_name: mine}");
  EXPECT_NE(e.find("was tokenized with 'another-tokenizer', but tokenizer_name says 'mine'"), std::string::npos) << e;
}

// ---- prefetching ------------------------------------------------------------------------------

TEST(BatchPrefetcher, BuildsTheNextStepWhileTheCurrentOneRuns) {
  std::mutex mutex;
  std::vector<int64_t> built;
  BatchPrefetcher prefetcher(
      [&](int64_t step) {
        std::lock_guard<std::mutex> lock(mutex);
        built.push_back(step);
        return at::full({1}, step, at::kLong);
      },
      3);
  EXPECT_EQ(prefetcher.get(1).item<int64_t>(), 1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {  // step 2 is built without being asked for
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (built.size() == 2) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    EXPECT_EQ(built, (std::vector<int64_t>{1, 2}));
  }
  EXPECT_EQ(prefetcher.get(2).item<int64_t>(), 2);
  EXPECT_EQ(prefetcher.get(3).item<int64_t>(), 3);
  {
    std::lock_guard<std::mutex> lock(mutex);
    EXPECT_EQ(built, (std::vector<int64_t>{1, 2, 3}));  // never beyond the last step
  }
  EXPECT_EQ(prefetcher.get(1).item<int64_t>(), 1);  // out of order: built on demand
}

TEST(BatchPrefetcher, RethrowsTheBuildError) {
  BatchPrefetcher prefetcher(
      [](int64_t step) -> at::Tensor {
        if (step == 2) throw Error("file vanished");
        return at::zeros({1});
      },
      5);
  prefetcher.get(1);
  EXPECT_NE(error_of([&] { prefetcher.get(2); }).find("file vanished"), std::string::npos);
}

}  // namespace
}  // namespace triax::data
