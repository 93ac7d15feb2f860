// The checkpoint store in one process: HDF5 tensors (bf16 bit-exact), the step folder's
// visibility rules (latest, partial folders, keep_last), and whole training runs saved and
// resumed: bit-exact continuation, parameters and optimizer state equal after a load, and every
// kind of bad checkpoint refused with the file and the tensor named.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "test_plugin_registry.hpp"
#include "triax/checkpoint_async/save_strategies.hpp"
#include "triax/config_reader.hpp"
#include "triax/core/checkpoint/checkpoint_error.hpp"
#include "triax/core/checkpoint/checkpoint_folder.hpp"
#include "triax/core/checkpoint/checkpoint_writer.hpp"
#include "triax/core/checkpoint/checkpoint_reader.hpp"
#include "triax/core/comm/communicator.hpp"
#include "triax/config/train_config.hpp"
#include "triax/core/plugins/plugin_registry.hpp"
#include "triax/core/trainer.hpp"
#include "triax/interop/checksum.hpp"
#include "triax/interop/hdf5_file.hpp"

namespace triax::checkpoint {
namespace {

using interop::crc32_of;
using interop::Hdf5File;

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("triax_checkpoint_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(Hdf5File, TensorsRoundTripBitExactInEveryDtype) {
  const fs::path dir = fresh_dir("hdf5");
  const std::string path = (dir / "t.h5").string();
  std::vector<at::Tensor> tensors = {at::randn({3, 5}),
                                     at::randn({7}, at::kDouble),
                                     at::randn({4, 3}).to(at::kBFloat16),
                                     at::randn({2, 2, 2}).to(at::kHalf),
                                     at::arange(10, at::kLong),
                                     at::randint(0, 255, {6}, at::kByte),
                                     at::full({}, 3.5f),  // a scalar
                                     at::empty({0, 4})};  // an empty shard
  {
    Hdf5File file = Hdf5File::create(path);
    for (size_t i = 0; i < tensors.size(); ++i) {
      file.write_tensor("/group/t" + std::to_string(i), tensors[i]);
      file.set_integers("/group/t" + std::to_string(i), "crc32", {crc32_of(tensors[i])});
    }
    file.set_string("/", "note", "hello");
    file.close();
  }
  Hdf5File file = Hdf5File::open_read(path);
  EXPECT_EQ(file.children("/group").size(), tensors.size());
  EXPECT_EQ(file.string("/", "note"), "hello");
  for (size_t i = 0; i < tensors.size(); ++i) {
    at::Tensor back = file.read_tensor("/group/t" + std::to_string(i));
    EXPECT_EQ(back.scalar_type(), tensors[i].scalar_type()) << i;
    EXPECT_EQ(back.sizes(), tensors[i].sizes()) << i;
    EXPECT_TRUE(at::equal(back, tensors[i])) << i;
    EXPECT_EQ(file.integers("/group/t" + std::to_string(i), "crc32").at(0), crc32_of(back)) << i;
  }
}

TEST(Hdf5File, RefusesMissingAndForeignFilesByName) {
  const fs::path dir = fresh_dir("foreign");
  EXPECT_NE(error_of([&] { Hdf5File::open_read((dir / "none.h5").string()); }).find("none.h5"), std::string::npos);
  std::ofstream(dir / "text.h5") << "not hdf5";
  EXPECT_NE(error_of([&] { Hdf5File::open_read((dir / "text.h5").string()); }).find("text.h5 is not an HDF5 file"),
            std::string::npos);
}

TEST(CheckpointFolder, LatestResolveAndPrune) {
  const fs::path root = fresh_dir("folder");
  for (int step : {2, 4, 6}) {
    fs::create_directories(root / step_folder_name(step));
    std::ofstream(root / step_folder_name(step) / kMetadataFile) << "x";
  }
  fs::create_directories(root / partial_folder_name(5));  // an interrupted save
  fs::create_directories(root / partial_folder_name(8));  // one still running
  point_latest(root, root / step_folder_name(4));
  EXPECT_EQ(resolve_checkpoint(root.string()), root / step_folder_name(4));
  EXPECT_EQ(resolve_checkpoint((root / step_folder_name(6)).string()), root / step_folder_name(6));
  EXPECT_EQ(list_checkpoints(root).size(), 3u);  // partial folders are not checkpoints

  // keep_last 1 keeps the newest, and never removes the one latest names.
  prune_checkpoints(root, 1, 6);
  EXPECT_FALSE(fs::exists(root / step_folder_name(2)));
  EXPECT_TRUE(fs::exists(root / step_folder_name(4)));
  EXPECT_TRUE(fs::exists(root / step_folder_name(6)));
  EXPECT_FALSE(fs::exists(root / partial_folder_name(5)));
  EXPECT_TRUE(fs::exists(root / partial_folder_name(8)));

  // latest naming a folder without metadata (never the case after a save) is refused by name.
  point_latest(root, root / partial_folder_name(8));
  EXPECT_NE(error_of([&] { resolve_checkpoint(root.string()); }).find("not a complete checkpoint"), std::string::npos);
  EXPECT_NE(error_of([&] { resolve_checkpoint((root / "nowhere").string()); }).find("no such folder"),
            std::string::npos);
}

// ---- whole runs ----------------------------------------------------------------------------

struct RunOptions {
  int steps = 6;
  int interval = 3;
  std::string dtype = "float32";
  int hidden = 32;
  std::string optimizer = "fused";  // or "foreach"
  std::string extra;                // more YAML lines under checkpoints
};

std::string tiny_config(const fs::path& run_dir, const RunOptions& o) {
  return "general: {project: test, run: test, seed: 5, device: cpu}\n"
         "checkpoints:\n"
         "  checkpoints_path: " +
         run_dir.string() +
         "\n"
         "  checkpoint_interval: " +
         std::to_string(o.interval) + "\n" + o.extra +
         "parallelism: {dp: 1, tp: 1, pp: 1, pp_engine: afab}\n"
         "model:\n"
         "  plugin: llama\n"
         "  dtype: " +
         o.dtype +
         "\n"
         "  init_method: {std: 0.02}\n"
         "  make_vocab_size_divisible_by: 8\n"
         "  model_config: {vocab_size: 61, hidden_size: " +
         std::to_string(o.hidden) +
         ", intermediate_size: 64, num_hidden_layers: 2,\n"
         "                 num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 64,\n"
         "                 tie_word_embeddings: false}\n"
         "tokens: {sequence_length: 16, micro_batch_size: 2, batch_accumulation_per_replica: 2, train_steps: " +
         std::to_string(o.steps) +
         "}\n"
         "optimizer:\n"
         "  optimizer_factory: {name: adamW, adam_beta1: 0.9, adam_beta2: 0.95, adam_eps: 1.0e-8, "
         "torch_adam_is_fused: " +
         std::string(o.optimizer == "fused" ? "true" : "false") +
         "}\n"
         "  zero_stage: 0\n"
         "  weight_decay: 0.01\n"
         "  clip_grad: 1.0\n"
         "  learning_rate_scheduler: {learning_rate: 0.01, lr_warmup_steps: 2, lr_decay_style: cosine}\n"
         "data_stages: [{name: synthetic, start_training_step: 1, data: {dataset: null, seed: 3}}]\n"
         "logging: {log_level: warning, iteration_step_info_interval: 1}\n";
}

struct Finished {
  TrainSummary summary;
  std::map<std::string, at::Tensor> parameters;
};

Finished train(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  YAML::Node root = YAML::Load(yaml);
  for (const auto& o : overrides) apply_override(root, o);
  TrainConfig config = parse_train_config(root, "test.yaml");
  SingleProcessCommunicator comm;
  const RegisteredSaveStrategies save_strategies;  // checkpoints.async_save
  Trainer trainer(std::move(config), testing::test_plugin_registry(), comm, nullptr, &save_strategies);
  Finished out;
  out.summary = trainer.train();
  for (const auto& p : trainer.parameters()) out.parameters[p.name] = p.tensor.detach().clone();
  return out;
}

void expect_bit_identical_continuation(const RunOptions& options, const std::string& name) {
  const fs::path whole = fresh_dir(name + "_whole"), resumed = fresh_dir(name + "_resumed");
  Finished uninterrupted = train(tiny_config(whole, options));
  ASSERT_TRUE(fs::exists(whole / step_folder_name(3) / kMetadataFile));
  ASSERT_TRUE(fs::exists(whole / step_folder_name(6) / kMetadataFile));  // the final save
  Finished continued = train(tiny_config(resumed, options),
                             {"checkpoints.resume_checkpoint_path=" + (whole / step_folder_name(3)).string()});
  ASSERT_EQ(continued.summary.losses.size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(continued.summary.losses[i], uninterrupted.summary.losses[i + 3]) << "step " << i + 4;
  // Rows of the padded vocabulary (61 -> 64) are padding: never used, not stored, zero after a load.
  for (const auto& [param, tensor] : uninterrupted.parameters)
    EXPECT_TRUE(at::equal(continued.parameters.at(param).narrow(0, 0, std::min<int64_t>(61, tensor.size(0))),
                          tensor.narrow(0, 0, std::min<int64_t>(61, tensor.size(0)))))
        << param;
  EXPECT_EQ(continued.summary.consumed_tokens, uninterrupted.summary.consumed_tokens);
}

TEST(CheckpointResume, Fp32FusedAdamContinuesBitForBit) { expect_bit_identical_continuation({}, "fp32"); }

TEST(CheckpointResume, Bf16WithMastersContinuesBitForBit) {
  RunOptions options;
  options.dtype = "bfloat16";
  options.optimizer = "foreach";
  expect_bit_identical_continuation(options, "bf16");
}

TEST(CheckpointResume, SavedStateMatchesTheLiveRun) {
  const fs::path dir = fresh_dir("contents");
  RunOptions options;
  options.steps = 3;
  Finished run = train(tiny_config(dir, options));
  CheckpointReader reader(dir.string());  // through `latest`
  EXPECT_EQ(reader.metadata().step, 3);
  EXPECT_TRUE(reader.metadata().has_optimizer_state);
  EXPECT_EQ(reader.metadata().consumed_tokens, run.summary.consumed_tokens);
  EXPECT_EQ(reader.metadata().data.completed_steps, 3);
  // The padded vocabulary (61 -> 64) is stored without its padding rows.
  EXPECT_EQ(reader.parameter_shape("model.embed_tokens.weight"), (std::vector<int64_t>{61, 32}));
  for (const auto& [name, tensor] : run.parameters) {
    at::Tensor whole = reader.whole_parameter(name);
    EXPECT_TRUE(at::equal(whole, tensor.narrow(0, 0, whole.size(0)))) << name;
    EXPECT_TRUE(reader.has_state(name, "exp_avg")) << name;
    EXPECT_TRUE(reader.has_state(name, "step")) << name;
  }
  for (const auto& check : reader.verify()) EXPECT_EQ(check.problem, "") << check.dataset;
}

TEST(CheckpointResume, KeepLastRemovesOlderSteps) {
  const fs::path dir = fresh_dir("keep");
  RunOptions options;
  options.steps = 8;
  options.interval = 2;
  options.extra = "  keep_last: 2\n";
  train(tiny_config(dir, options));
  std::vector<int64_t> kept;
  for (const auto& [step, folder] : list_checkpoints(dir)) kept.push_back(step);
  EXPECT_EQ(kept, (std::vector<int64_t>{6, 8}));
  EXPECT_EQ(resolve_checkpoint(dir.string()), dir / step_folder_name(8));
}

TEST(CheckpointResume, AsyncSaveContinuesBitForBit) {
  RunOptions options;
  options.dtype = "bfloat16";
  options.optimizer = "foreach";
  options.extra = "  async_save: true\n";
  expect_bit_identical_continuation(options, "async");
}

// A save written in the background holds what a synchronous save of the same step holds, and the
// run trains exactly as it does without it (the copies finish before the optimizer changes them).
TEST(CheckpointResume, AsyncSaveStoresWhatASynchronousSaveStores) {
  const fs::path sync_dir = fresh_dir("sync_save"), async_dir = fresh_dir("async_save");
  RunOptions options;
  options.interval = 2;
  Finished sync_run = train(tiny_config(sync_dir, options));
  options.extra = "  async_save: true\n";
  Finished async_run = train(tiny_config(async_dir, options));
  EXPECT_EQ(async_run.summary.losses, sync_run.summary.losses);
  for (int64_t step : {2, 4, 6}) {
    CheckpointReader sync_saved((sync_dir / step_folder_name(step)).string());
    CheckpointReader async_saved((async_dir / step_folder_name(step)).string());
    for (const auto& [name, tensor] : sync_run.parameters) {
      EXPECT_TRUE(at::equal(async_saved.whole_parameter(name), sync_saved.whole_parameter(name))) << name;
      EXPECT_TRUE(async_saved.has_state(name, "exp_avg")) << name;
    }
    for (const auto& check : async_saved.verify()) EXPECT_EQ(check.problem, "") << check.dataset;
  }
  EXPECT_EQ(resolve_checkpoint(async_dir.string()), async_dir / step_folder_name(6));
  // What a committed save cost goes into a later logged step's metrics: step 2's (step 4's is
  // committed by step 6's save, after the last line).
  std::ifstream metrics(async_dir / "metrics.jsonl");
  const std::string lines((std::istreambuf_iterator<char>(metrics)), std::istreambuf_iterator<char>());
  EXPECT_NE(lines.find("\"checkpoint\": {\"step\": 2, \"stall_s\": "), std::string::npos) << lines;
}

// Removing an old checkpoint (keep_last) runs off the training thread: with the removal of step 2
// made 1 s slower (TRIAX_FAULT=slow_prune), step 5 trains while step 2 is being removed after step
// 4's commit, and the save of step 6 waits for the removal before its own commit.
TEST(CheckpointResume, KeepLastRemovesOldStepsWithoutHoldingUpTheSteps) {
  const fs::path dir = fresh_dir("slow_prune");
  RunOptions options;
  options.interval = 2;
  options.extra = "  keep_last: 1\n";
  setenv("TRIAX_FAULT", "slow_prune:0:4", 1);
  ::testing::internal::CaptureStderr();
  train(tiny_config(dir, options), {"logging.log_level=info"});
  const std::string log = ::testing::internal::GetCapturedStderr();
  unsetenv("TRIAX_FAULT");
  const size_t step_5 = log.find("step 5/6 | loss");
  const size_t removed = log.find("checkpoint: removed " + (dir / step_folder_name(2)).string());
  ASSERT_NE(step_5, std::string::npos) << log;
  ASSERT_NE(removed, std::string::npos) << log;
  EXPECT_LT(step_5, removed) << log;
  std::vector<int64_t> kept;
  for (const auto& [step, folder] : list_checkpoints(dir)) kept.push_back(step);
  EXPECT_EQ(kept, (std::vector<int64_t>{6}));  // the end of the run waited for step 4's removal
  EXPECT_EQ(resolve_checkpoint(dir.string()), dir / step_folder_name(6));
}

// Trains the tiny model on a GPU with synchronous and with background saves (named `name`): the
// files equal and the runs train the same. Returns the background run's log.
std::string cuda_async_save_log(const std::string& name) {
  const fs::path sync_dir = fresh_dir(name + "_sync"), async_dir = fresh_dir(name + "_async");
  RunOptions options;
  options.interval = 2;
  options.dtype = "bfloat16";
  Finished sync_run = train(tiny_config(sync_dir, options), {"general.device=cuda"});
  options.extra = "  async_save: true\n";
  ::testing::internal::CaptureStderr();
  Finished async_run = train(tiny_config(async_dir, options), {"general.device=cuda", "logging.log_level=info"});
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("checkpoint: step 2 copied into host memory"), std::string::npos) << log;
  EXPECT_EQ(async_run.summary.losses, sync_run.summary.losses);
  for (int64_t step : {2, 4, 6}) {
    const std::string folder = step_folder_name(step) + "/" + rank_file_name(0);
    const Hdf5File sync_file = Hdf5File::open_read((sync_dir / folder).string());
    const Hdf5File async_file = Hdf5File::open_read((async_dir / folder).string());
    std::vector<std::string> datasets;
    for (const std::string& name : sync_file.children("/model")) datasets.push_back(parameter_dataset(name));
    for (const std::string& name : sync_file.children("/optimizer"))
      for (const std::string& state : sync_file.children("/optimizer/" + name))
        datasets.push_back(optimizer_dataset(name, state));
    EXPECT_GT(datasets.size(), sync_run.parameters.size());  // parameters, masters and moments
    for (const std::string& dataset : datasets)
      EXPECT_TRUE(at::equal(async_file.read_tensor(dataset), sync_file.read_tensor(dataset))) << dataset;
  }
  return log;
}

// On a GPU a background save of the tiny model passes through a staging buffer in device memory
// (it leaves plenty spare): the files equal a synchronous save's and the run trains the same.
TEST(CheckpointCuda, AsyncSaveStagedInDeviceMemoryStoresWhatASynchronousSaveStores) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const std::string log = cuda_async_save_log("cuda_staged");
  EXPECT_EQ(log.find("copied to host directly"), std::string::npos) << log;  // every save after step 1 staged
  EXPECT_NE(log.find("staged in device memory"), std::string::npos) << log;
}

// With room for only half the checkpoint (TRIAX_FAULT=small_staging_room), the saves after step 1
// stage some pieces and copy the others directly: the files still equal a synchronous save's.
TEST(CheckpointCuda, AsyncSavePartlyStagedStoresWhatASynchronousSaveStores) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  setenv("TRIAX_FAULT", "small_staging_room", 1);
  const std::string log = cuda_async_save_log("cuda_partly_staged");
  unsetenv("TRIAX_FAULT");
  for (const std::string step : {"2", "4", "6"}) {
    const size_t line = log.find("checkpoint: step " + step + " copied into host memory");
    ASSERT_NE(line, std::string::npos) << log;
    const std::string text = log.substr(line, log.find('\n', line) - line);
    EXPECT_NE(text.find("pieces, the largest that fit) in device memory, copied "), std::string::npos) << text;
    EXPECT_NE(text.find(" GB to host directly: "), std::string::npos) << text;
  }
}

TEST(CheckpointInit, InitMethodPathStartsANewRunFromTheStoredWeights) {
  const fs::path source = fresh_dir("init_source");
  RunOptions options;
  options.steps = 3;
  Finished trained = train(tiny_config(source, options));
  // Step 1 of the new run has learning rate 0 (warm-up from 0): its parameters stay the loaded ones.
  RunOptions one_step = options;
  one_step.steps = 1;
  one_step.interval = 0;
  Finished started =
      train(tiny_config(fresh_dir("init_target"), one_step), {"model.init_method={path: " + source.string() + "}"});
  for (const auto& [name, tensor] : trained.parameters) {
    const int64_t rows = std::min<int64_t>(61, tensor.size(0));
    EXPECT_TRUE(at::equal(started.parameters.at(name).narrow(0, 0, rows), tensor.narrow(0, 0, rows))) << name;
  }
  EXPECT_EQ(started.summary.losses.size(), 1u);  // a new run: step 1, fresh optimizer
}

// Flips one byte inside the stored values of a dataset whose first values are known.
void corrupt_values(const fs::path& file, const at::Tensor& values) {
  std::ifstream in(file, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string pattern(static_cast<const char*>(values.data_ptr()), 64);
  const size_t at = bytes.find(pattern);
  ASSERT_NE(at, std::string::npos);
  bytes[at + 10] = static_cast<char>(bytes[at + 10] ^ 0x40);
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(CheckpointErrors, CorruptTruncatedMissingAndForeignCheckpointsAreRefusedByName) {
  const fs::path dir = fresh_dir("bad");
  RunOptions options;
  options.steps = 2;
  options.interval = 2;
  Finished run = train(tiny_config(dir, options));
  const fs::path step = dir / step_folder_name(2);
  const fs::path file = step / rank_file_name(0);

  // Another model shape: the tensor and both shapes are named.
  RunOptions wider = options;
  wider.hidden = 48;
  std::string message = error_of([&] {
    train(tiny_config(fresh_dir("bad_wider"), wider), {"checkpoints.resume_checkpoint_path=" + step.string()});
  });
  EXPECT_NE(message.find("model.embed_tokens.weight has shape [61, 32]"), std::string::npos) << message;
  EXPECT_NE(message.find("[61, 48]"), std::string::npos) << message;

  // A flipped byte: verify() and loading name the file and the dataset.
  const fs::path copy = fresh_dir("bad_copy") / "step";
  fs::copy(step, copy, fs::copy_options::recursive);
  corrupt_values(copy / rank_file_name(0), run.parameters.at("model.layers.1.mlp.down_proj.weight").contiguous());
  CheckpointReader reader(copy.string());
  int broken = 0;
  for (const auto& check : reader.verify())
    if (!check.problem.empty()) {
      ++broken;
      EXPECT_NE(check.problem.find("rank_00000.h5"), std::string::npos) << check.problem;
      EXPECT_NE(check.problem.find("model.layers.1.mlp.down_proj.weight"), std::string::npos) << check.problem;
      EXPECT_NE(check.problem.find("checksum mismatch"), std::string::npos) << check.problem;
    }
  EXPECT_EQ(broken, 1);
  message = error_of([&] {
    train(tiny_config(fresh_dir("bad_resume"), options), {"checkpoints.resume_checkpoint_path=" + copy.string()});
  });
  EXPECT_NE(message.find("checksum mismatch"), std::string::npos) << message;

  // A truncated file (a fresh copy).
  const fs::path cut = fresh_dir("bad_cut") / "step";
  fs::copy(step, cut, fs::copy_options::recursive);
  fs::resize_file(cut / rank_file_name(0), fs::file_size(cut / rank_file_name(0)) / 2);
  message = error_of([&] {
    CheckpointReader truncated(cut.string());
    for (const auto& check : truncated.verify())
      if (!check.problem.empty()) throw std::runtime_error(check.problem);
  });
  EXPECT_NE(message.find("rank_00000.h5"), std::string::npos) << message;
  EXPECT_NE(message.find("truncated"), std::string::npos) << message;

  // A missing rank file, and a metadata file that is not one.
  fs::remove(copy / rank_file_name(0));
  message = error_of([&] { CheckpointReader missing(copy.string()); });
  EXPECT_NE(message.find("rank_00000.h5 is missing"), std::string::npos) << message;
  std::ofstream(copy / kMetadataFile) << "format: something-else\n";
  message = error_of([&] { CheckpointReader foreign(copy.string()); });
  EXPECT_NE(message.find("format"), std::string::npos) << message;
}

}  // namespace
}  // namespace triax::checkpoint
