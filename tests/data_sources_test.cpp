// The data sources behind one interface: a stage names its source by key (data.source), the
// registry refuses an unknown one, and naming the default source changes nothing.
#include "triax/data/source_registry.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "config_reference/config_reference.hpp"
#include "training_data_test_support.hpp"
#include "triax/data/training_data.hpp"
#include "triax/error.hpp"

namespace triax::data {
namespace {

using namespace test;

std::string config_error_of(const TrainConfig& config) {
  try {
    TrainingData data(config, 40000, layout());
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(DataSources, AnUnknownSourceIsAConfigErrorNamingTheKeyAndTheKnownSources) {
  const TrainConfig config = run_config(
      "[{name: a, start_training_step: 1, data: {}}, {name: b, start_training_step: 5, data: {source: parquet}}]");
  const std::string message = config_error_of(config);
  EXPECT_NE(message.find("run.yaml: data_stages.1.data.source: unknown data source 'parquet'"), std::string::npos)
      << message;
  EXPECT_NE(message.find("the known sources are synthetic, token_folders"), std::string::npos) << message;
  try {
    check_source_names(config);
    ADD_FAILURE() << "check_source_names accepted an unknown source";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
  EXPECT_NO_THROW(check_source_names(run_config("[{name: a, start_training_step: 1, data: {source: synthetic}}]")));
}

TEST(DataSources, ASourceRefusesTheDatasetItCannotRead) {
  TempFolder dir;
  write_dataset(dir / "a", 1, 20);
  const std::string folders = "{dataset_folder: [" + (dir / "a").string() + "]}";
  const std::string synthetic_with_folders = config_error_of(
      run_config("[{name: s, start_training_step: 1, data: {source: synthetic, dataset: " + folders + "}}]"));
  EXPECT_NE(synthetic_with_folders.find("data_stages.0.data.dataset: the synthetic stream"), std::string::npos)
      << synthetic_with_folders;
  const std::string folders_without_dataset =
      config_error_of(run_config("[{name: s, start_training_step: 1, data: {source: token_folders}}]"));
  EXPECT_NE(folders_without_dataset.find("data_stages.0.data.source: token_folders reads"), std::string::npos)
      << folders_without_dataset;
}

TEST(DataSources, AnExplicitSyntheticSourceTrainsTheDefaultStream) {
  const TrainConfig defaulted = run_config("[{name: s, start_training_step: 1, data: {seed: 3}}]");
  const TrainConfig named = run_config("[{name: s, start_training_step: 1, data: {seed: 3, source: synthetic}}]");
  ASSERT_EQ(defaulted.data_stages[0].data.source, "synthetic");
  TrainingData a(defaulted, 40000, layout());
  TrainingData b(named, 40000, layout());
  for (int64_t step = 1; step <= 4; ++step) EXPECT_TRUE(at::equal(a.step_samples(step), b.step_samples(step)));
  EXPECT_TRUE(at::equal(a.validation_samples(4, 2), b.validation_samples(4, 2)));
  EXPECT_EQ(a.describe(), b.describe());
  EXPECT_EQ(a.state(4), b.state(4));
}

TEST(DataSources, AnExplicitTokenFoldersSourceReadsTheSameMixture) {
  TempFolder dir;
  write_dataset(dir / "a", 1, 40);
  write_dataset(dir / "b", 2, 30);
  const std::string data = "seed: 5, dataset: {dataset_folder: [" + (dir / "a").string() + ", " +
                           (dir / "b").string() + "]}, validation: {held_out_fraction: 0.2}";
  TrainingData a(run_config("[{name: s, start_training_step: 1, data: {" + data + "}}]"), 40000, layout());
  TrainingData b(run_config("[{name: s, start_training_step: 1, data: {source: token_folders, " + data + "}}]"), 40000,
                 layout());
  EXPECT_TRUE(at::equal(a.samples(0, 50), b.samples(0, 50)));
  EXPECT_TRUE(at::equal(a.validation_samples(1, 1), b.validation_samples(1, 1)));
  EXPECT_EQ(a.state(7), b.state(7));
}

// docs/config-reference.md, generated from the reference, describes every source a stage can name.
TEST(DataSources, TheConfigReferenceListsEverySource) {
  const config_reference::Key* source_key = nullptr;
  for (const config_reference::Section& section : config_reference::reference().sections)
    for (const config_reference::Key& key : section.keys)
      if (section.path == "data_stages[]" && key.name == "data.source") source_key = &key;
  ASSERT_NE(source_key, nullptr);
  for (const RegisteredSource& source : registered_sources())
    EXPECT_NE(source_key->notes.find("`" + std::string(source.name) + "`"), std::string::npos) << source.name;
}

}  // namespace
}  // namespace triax::data
