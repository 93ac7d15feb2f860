// Validation data: the samples held out of the training folders are never trained on, the same
// samples come back at every validation and at every data-parallel layout, validation folders
// of their own, the synthetic stream's held-out samples, and bad input naming its key.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <set>
#include <utility>

#include "training_data_test_support.hpp"

namespace triax::data {
namespace {

using namespace test;
using SampleSet = std::set<std::pair<int, int64_t>>;  // (dataset, sample in its folder)

SampleSet samples_in(const at::Tensor& rows) {
  SampleSet out;
  for (int64_t r = 0; r < rows.size(0); ++r) out.insert({dataset_of(rows[r]), sample_of(rows[r])});
  return out;
}

std::string stage_with(const std::string& dataset, const std::string& validation, int seed = 5) {
  return "[{name: s, start_training_step: 1, data: {seed: " + std::to_string(seed) + ", dataset: " + dataset +
         (validation.empty() ? "" : ", validation: " + validation) + "}}]";
}

// Folders a (50 samples) and b (30): 20% held out is 10 of a and 6 of b.
struct TwoFolders {
  TempFolder dir;
  std::string dataset;
  TwoFolders() {
    write_dataset(dir / "a", 1, 50);
    write_dataset(dir / "b", 2, 30, 3);
    dataset = "{dataset_folder: [" + (dir / "a").string() + ", " + (dir / "b").string() + "]}";
  }
};

TEST(ValidationData, HeldOutSamplesAreNeverInTheTrainingStream) {
  TwoFolders folders;
  TrainingData data(run_config(stage_with(folders.dataset, "{held_out_fraction: 0.2}")), 40000, layout());
  // Five epochs of training: every sample training may read, by its index in its folder.
  const SampleSet trained = samples_in(data.samples(0, 5 * 64));
  const SampleSet held_out = samples_in(data.validation_samples(1, 8));  // 8 micro-batches of 2: all 16
  EXPECT_EQ(trained.size(), 64u);                                        // 40 of a, 24 of b
  EXPECT_EQ(held_out.size(), 16u);
  for (const auto& sample : held_out) EXPECT_EQ(trained.count(sample), 0u) << sample.first << ":" << sample.second;
  int of_a = 0;
  for (const auto& sample : held_out) of_a += sample.first == 1 ? 1 : 0;
  EXPECT_EQ(of_a, 10);
  const DataLoaderState state = data.state(1);
  EXPECT_EQ(state.stages[0].datasets[0].samples_per_epoch, 40);
  EXPECT_EQ(state.stages[0].datasets[1].samples_per_epoch, 24);
}

TEST(ValidationData, EveryValidationAndEveryDataParallelLayoutReadsTheSameSamples) {
  TwoFolders folders;
  const TrainConfig config = run_config(stage_with(folders.dataset, "{held_out_fraction: 0.2}"));
  TrainingData single(config, 40000, layout());
  const at::Tensor all = single.validation_samples(1, 6);
  EXPECT_TRUE(at::equal(single.validation_samples(17, 6), all));  // a later validation
  TrainingData rank0(config, 40000, layout(0, 2)), rank1(config, 40000, layout(1, 2));
  EXPECT_TRUE(at::equal(at::cat({rank0.validation_samples(1, 3), rank1.validation_samples(1, 3)}), all));
}

TEST(ValidationData, TheHeldOutChoiceIsSeededByTheDataSeed) {
  TwoFolders folders;
  const auto held_out = [&](int seed) {
    TrainingData data(run_config(stage_with(folders.dataset, "{held_out_fraction: 0.2}", seed)), 40000, layout());
    return samples_in(data.validation_samples(1, 8));
  };
  EXPECT_EQ(held_out(5), held_out(5));
  EXPECT_NE(held_out(5), held_out(6));
}

TEST(ValidationData, WithoutValidationDataTheTrainingStreamIsUnchanged) {
  TwoFolders folders;
  TrainingData plain(run_config(stage_with(folders.dataset, "")), 40000, layout());
  TrainingData with_folders(
      run_config(stage_with(folders.dataset, "{dataset_folder: " + (folders.dir / "b").string() + "}")), 40000,
      layout());
  EXPECT_TRUE(at::equal(plain.samples(0, 100), with_folders.samples(0, 100)));
}

TEST(ValidationData, ValidationFoldersOfTheirOwnGiveEverySampleOfThem) {
  TwoFolders folders;
  write_dataset(folders.dir / "c", 3, 12);
  TrainingData data(run_config(stage_with(folders.dataset, "{dataset_folder: [" + (folders.dir / "c").string() + "]}")),
                    40000, layout());
  const SampleSet seen = samples_in(data.validation_samples(1, 6));
  EXPECT_EQ(seen.size(), 12u);
  for (const auto& sample : seen) EXPECT_EQ(sample.first, 3);
  EXPECT_EQ(samples_in(data.samples(0, 80)).size(), 80u);  // training keeps all of a and b
}

TEST(ValidationData, TheSyntheticStreamValidatesOnSamplesBeyondTraining) {
  TrainingData data(run_config("[{name: s, start_training_step: 1, data: {dataset: null, seed: 3}}]", 20,
                               ", val_check_interval: 5, limit_val_batches: 2"),
                    128, layout());
  const at::Tensor validation = data.validation_samples(5, 2);
  EXPECT_EQ(validation.size(0), 4);
  EXPECT_TRUE(at::equal(validation, data.validation_samples(20, 2)));
  const at::Tensor trained = data.samples(0, 200);
  for (int64_t r = 0; r < validation.size(0); ++r)
    EXPECT_FALSE((trained == validation[r]).all(1).any().item<bool>()) << "validation sample " << r;
}

TEST(ValidationData, BadValidationDataIsRefusedNamingKeyAndFile) {
  TwoFolders folders;
  const auto error_for = [&](const std::string& validation, const std::string& tokens_extra = "") {
    return error_of(
        [&] { TrainingData(run_config(stage_with(folders.dataset, validation), 20, tokens_extra), 40000, layout()); });
  };
  write_token_file(folders.dir / "other" / "x.ds", iota_tokens(80), 2, {}, true, "another-tokenizer");
  std::string e = error_for("{dataset_folder: [" + (folders.dir / "other").string() + "]}");
  EXPECT_NE(e.find("run.yaml: data_stages.0.data.validation.dataset_folder: " + (folders.dir / "other").string() +
                   " was tokenized with 'another-tokenizer', but the training data"),
            std::string::npos)
      << e;
  e = error_for("{dataset_folder: [" + (folders.dir / "gone").string() + "]}");
  EXPECT_NE(e.find("data_stages.0.data.validation.dataset_folder: " + (folders.dir / "gone").string()),
            std::string::npos)
      << e;
  e = error_for("{held_out_fraction: 0.2}", ", val_check_interval: 5, limit_val_batches: 9");
  EXPECT_NE(e.find("run.yaml: tokens.limit_val_batches: 9 micro-batches of 2 samples on each of 1 replicas need 18 "
                   "validation samples, but data_stages.0.data.validation holds 16"),
            std::string::npos)
      << e;
  write_dataset(folders.dir / "one", 3, 1, 1);
  e = error_of([&] {
    TrainingData(
        run_config(stage_with("{dataset_folder: " + (folders.dir / "one").string() + "}", "{held_out_fraction: 0.5}")),
        40000, layout());
  });
  EXPECT_NE(e.find("run.yaml: data_stages.0.data.validation.held_out_fraction: " + (folders.dir / "one").string() +
                   " holds 1 sample(s): at least 2 are needed"),
            std::string::npos)
      << e;
}

TEST(ValidationConfig, BadKeysAreRefusedNamingThem) {
  const std::string folder = "{dataset_folder: /nonexistent}";
  const auto error_for = [&](const std::string& stages, const std::string& tokens_extra = "") {
    return error_of([&] { run_config(stages, 20, tokens_extra); });
  };
  for (const char* fraction : {"0", "1", "1.5", "-0.1"}) {
    const std::string e = error_for(stage_with(folder, std::string("{held_out_fraction: ") + fraction + "}"));
    EXPECT_NE(e.find("run.yaml: data_stages.0.data.validation.held_out_fraction"), std::string::npos) << e;
    EXPECT_NE(e.find("is not strictly between 0 and 1"), std::string::npos) << e;
  }
  std::string e = error_for(stage_with(folder, "{held_out_fraction: 0.1, dataset_folder: /x}"));
  EXPECT_NE(e.find("data_stages.0.data.validation.dataset_folder"), std::string::npos) << e;
  EXPECT_NE(e.find("not both"), std::string::npos) << e;
  e = error_for(stage_with(folder, "{fraction: 0.1}"));
  EXPECT_NE(e.find("run.yaml: data_stages.0.data.validation (line 5): expected a mapping with held_out_fraction"),
            std::string::npos)
      << e;
  e = error_for(stage_with(folder, ""), ", val_check_interval: 5, limit_val_batches: 0");
  EXPECT_NE(e.find("run.yaml: tokens.limit_val_batches (line 3): is 0, but val_check_interval is 5"), std::string::npos)
      << e;
  e = error_for(stage_with(folder, ""), ", val_check_interval: 5, limit_val_batches: 2");
  EXPECT_NE(e.find("run.yaml: data_stages.0.data.validation: tokens.val_check_interval is 5, but this stage has no "
                   "validation data"),
            std::string::npos)
      << e;
  e = error_for("[{name: s, start_training_step: 1, data: {dataset: null, validation: {held_out_fraction: 0.1}}}]");
  EXPECT_NE(e.find("data_stages.0.data.validation (line 5): the synthetic stream (dataset: null) validates on "
                   "held-out samples of its own stream"),
            std::string::npos)
      << e;
  EXPECT_EQ(error_for("[{name: s, start_training_step: 1, data: {dataset: null}}]",
                      ", val_check_interval: 5, limit_val_batches: 2"),
            "(no error)");
}

}  // namespace
}  // namespace triax::data
