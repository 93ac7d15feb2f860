// Document positions for model_config._use_doc_masking: each sample's tokens numbered inside
// their documents as datatrove computes them for nanotron (0 at the sample's first token, then 0
// after each document end inside the sample), served beside the tokens by the run's data, the
// same after a resume; and the refusals: the synthetic stream, a file without its index.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "triax/data/token_folder.hpp"
#include "triax/data/training_data.hpp"
#include "data_test_support.hpp"
#include "triax/config/train_config.hpp"
#include "triax/error.hpp"

namespace triax::data {
namespace {

using namespace test;

constexpr int64_t kSequence = 9;  // samples of 10 tokens

TEST(DocumentPositions, RestartAfterEachDocumentEndInsideTheSample) {
  TempFolder dir;
  // Documents [0, 5), [5, 9), [9, 20), [20, 23), [23, 40): 4 samples of 10 tokens.
  write_token_file(dir / "docs" / "part.ds", iota_tokens(40), 2, {5, 9, 20, 23, 40});
  TokenFolderOptions options;
  options.sequence_length = kSequence;
  const TokenFolder folder((dir / "docs").string(), options);
  const std::vector<std::vector<int64_t>> expected = {
      {0, 1, 2, 3, 4, 0, 1, 2, 3, 0},  // ends 5 and 9 inside
      {0, 1, 2, 3, 4, 5, 6, 7, 8, 9},  // document [9, 20) cut by the sample: it starts over at 0
      {0, 1, 2, 0, 1, 2, 3, 4, 5, 6},  // the end at 20 is the sample's start; 23 inside
      {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}};  // the end at 40 is after the sample's last token
  for (int64_t s = 0; s < 4; ++s) {
    std::vector<int64_t> tokens(kSequence + 1), positions(kSequence + 1);
    folder.copy_sample(s, tokens.data(), positions.data());
    EXPECT_EQ(positions, expected[static_cast<size_t>(s)]) << "sample " << s;
    EXPECT_EQ(tokens.front(), s * (kSequence + 1));
  }
}

TrainConfig documents_run_config(const std::string& dataset, int64_t train_steps = 12) {
  const std::string yaml = R"(
model: {model_config: {vocab_size: 40000, _use_doc_masking: true}, init_method: {std: 0.02}}
tokens: {sequence_length: 9, micro_batch_size: 2, batch_accumulation_per_replica: 3, train_steps: )" +
                           std::to_string(train_steps) + R"(}
optimizer: {learning_rate_scheduler: {learning_rate: 0.001}}
data_stages: [{name: s, start_training_step: 1, data: {seed: 3, dataset: )" +
                           dataset + "}}]";
  return parse_train_config(YAML::Load(yaml), "run.yaml");
}

BatchLayout layout_with_positions(bool positions) {
  BatchLayout out{kSequence, 2, 3, 0, 1};
  out.document_positions = positions;
  return out;
}

// Documents of lengths 1..13 in turn, over 2000 tokens.
std::vector<uint64_t> varied_document_ends(uint64_t tokens) {
  std::vector<uint64_t> ends;
  for (uint64_t end = 0, length = 1; end < tokens; length = length % 13 + 1) {
    end = std::min(tokens, end + length);
    ends.push_back(end);
  }
  return ends;
}

TEST(DocumentPositions, StepSamplesCarryThemBesideTheTokensAndResumeExactly) {
  TempFolder dir;
  write_token_file(dir / "docs" / "part.ds", iota_tokens(2000), 2, varied_document_ends(2000));
  const TrainConfig config = documents_run_config("{dataset_folder: " + (dir / "docs").string() + "}");
  TrainingData with(config, 40000, layout_with_positions(true));
  TrainingData without(config, 40000, layout_with_positions(false));
  std::vector<at::Tensor> batches;
  for (int64_t step = 1; step <= 12; ++step) {
    const at::Tensor batch = with.step_samples(step);
    ASSERT_EQ(batch.sizes(), (std::vector<int64_t>{6, 2, kSequence + 1}));
    EXPECT_TRUE(at::equal(batch.select(1, 0), without.step_samples(step))) << "step " << step;
    // Each row's positions as the token index gives them: tokens are their own stream offsets.
    for (int64_t r = 0; r < 6; ++r) {
      const int64_t first = batch[r][0][0].item<int64_t>();
      std::vector<int64_t> tokens(kSequence + 1), positions(kSequence + 1);
      TokenFolderOptions options;
      options.sequence_length = kSequence;
      TokenFolder((dir / "docs").string(), options).copy_sample(first / (kSequence + 1), tokens.data(),
                                                                positions.data());
      EXPECT_TRUE(at::equal(batch[r][1], at::tensor(positions))) << "step " << step << " row " << r;
    }
    batches.push_back(batch);
  }
  TrainingData resumed(config, 40000, layout_with_positions(true));
  resumed.restore(with.state(5));
  for (int64_t step = 6; step <= 12; ++step)
    EXPECT_TRUE(at::equal(resumed.step_samples(step), batches[static_cast<size_t>(step - 1)])) << "step " << step;
}

TEST(DocumentPositions, TheSyntheticStreamIsRefusedNamingTheKey) {
  const TrainConfig config = documents_run_config("null");
  const std::string message = error_of([&] { TrainingData data(config, 40000, layout_with_positions(true)); });
  EXPECT_NE(message.find("run.yaml: model.model_config._use_doc_masking: true needs documents"), std::string::npos)
      << message;
  EXPECT_NE(message.find("data_stages.0.data.dataset is null"), std::string::npos) << message;
}

TEST(DocumentPositions, AFileWithoutItsIndexIsRefusedNamingIt) {
  TempFolder dir;
  write_token_file(dir / "docs" / "part.ds", iota_tokens(200), 2);
  fs::remove(dir / "docs" / "part.ds.index");
  const TrainConfig config = documents_run_config("{dataset_folder: " + (dir / "docs").string() + "}");
  const std::string message = error_of([&] { TrainingData data(config, 40000, layout_with_positions(true)); });
  EXPECT_NE(message.find("part.ds.index: missing: document masking needs"), std::string::npos) << message;
  EXPECT_NE(message.find("data_stages.0.data.dataset.dataset_folder"), std::string::npos) << message;
  EXPECT_NO_THROW(TrainingData(config, 40000, layout_with_positions(false)));
}

}  // namespace
}  // namespace triax::data
