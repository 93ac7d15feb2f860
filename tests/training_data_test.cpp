// A run's data: rows hold the samples the mixture names, epochs, data-parallel slices, stages,
// the checkpointable position, bad input, and prefetching.
#include "triax/data/training_data.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <thread>

#include "training_data_test_support.hpp"
#include "triax/config/train_config.hpp"
#include "triax/data/batch_prefetcher.hpp"
#include "triax/error.hpp"

namespace triax::data {
namespace {

using namespace test;

// ---- a run's data -----------------------------------------------------------------------------

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
  EXPECT_EQ(data.state(4).stages[0].datasets[0].epoch, 1);  // 24 samples: the first epoch exactly
  EXPECT_EQ(data.state(5).stages[0].datasets[0].epoch, 2);
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
  EXPECT_EQ(saved.stages[0].datasets[1].epoch, 2);  // b (13 samples) wrapped: 24 of its samples by step 12

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
