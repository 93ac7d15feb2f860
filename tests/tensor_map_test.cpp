// The tensor-map engine of interop/ on small tensors: each rule kind in both directions (a fused
// parameter split into HF tensors and concatenated back, E experts unstacked and stacked back, a
// [2, d, h] parameter flattened into one [2d, h] tensor and reshaped back, q/k/v grouped by kv head
// cut into separate q, k and v tensors and interleaved back, and parts of one tensor grouped),
// ignore globs, optional and tied rules, and refusals that name the file and the tensor.
#include "triax/interop/tensor_map.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "error_of.hpp"
#include "triax/error.hpp"
#include "triax/glob_match.hpp"

namespace fs = std::filesystem;
using triax::HfTensorRule;
using triax::interop::HfWeights;
using triax::interop::TensorMap;

namespace {

using triax::test::error_of;

HfTensorRule flatten(const std::string& name, std::vector<int64_t> shape, int32_t dim) {
  HfTensorRule rule = HfTensorRule::rename(name, std::move(shape));
  rule.kind = TRIAX_HF_FLATTEN;
  rule.dim = dim;
  return rule;
}

// A fused qkv [6, 2] from q [2, 2] and kv [4, 2]; 3 experts [3, 2, 2]; a norm; Mamba's in_proj;
// q/k/v grouped by kv head [2 groups, 2 + 1 + 1 rows, 3] from q [4, 3], k and v [2, 3]; a tied head alias.
std::vector<HfTensorRule> rules() {
  return {HfTensorRule::concat("attn.qkv", {6, 2}, 0, {"attn.q", "attn.kv"}, {2, 4}),
          HfTensorRule::stack("moe.experts", {3, 2, 2}, 0, {"moe.e0", "moe.e1", "moe.e2"}),
          HfTensorRule::rename("norm.weight", {2}, "model.norm.weight"),
          flatten("mixer.in_proj", {2, 3, 2}, 0),
          HfTensorRule::interleave("attn.grouped", {2, 4, 3}, 1, {"g.q", "g.k", "g.v"}, {2, 1, 1}),
          HfTensorRule::rename("embed", {5, 2}),
          HfTensorRule::rename("embed", {5, 2}, "lm_head.weight").as_optional(),
          HfTensorRule::ignore({"*.inv_freq"})};
}

class TensorMapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("triax_tensor_map_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    at::manual_seed(7);
    parameters_ = {{"attn.qkv", at::randn({6, 2})},        {"moe.experts", at::randn({3, 2, 2})},
                   {"norm.weight", at::randn({2})},        {"mixer.in_proj", at::randn({2, 3, 2})},
                   {"attn.grouped", at::randn({2, 4, 3})}, {"embed", at::randn({5, 2})}};
  }
  void TearDown() override { fs::remove_all(root_); }

  // Writes `tensors` as the folder's model.safetensors.
  std::string folder_with(const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
    const fs::path folder = root_ / ("f" + std::to_string(count_++));
    fs::create_directories(folder);
    triax::interop::write_safetensors((folder / "model.safetensors").string(), tensors);
    return folder.string();
  }
  // The HF tensors the map writes for parameters_.
  std::vector<std::pair<std::string, at::Tensor>> written(const TensorMap& map, at::ScalarType dtype = at::kFloat) {
    const TensorMap::Tensors tensors = map.write(parameters_, dtype, "test");
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (size_t i = 0; i < tensors.entries.size(); ++i) out.push_back({tensors.entries[i].name, tensors.tensor_of(i)});
    return out;
  }

  fs::path root_;
  int count_ = 0;
  std::map<std::string, at::Tensor> parameters_;
};

TEST_F(TensorMapTest, SplitsUnstacksAndRenamesOnWriteAndUndoesItOnRead) {
  const TensorMap map(rules(), "test plugin");
  const auto hf = written(map);
  std::vector<std::string> names;
  for (const auto& [name, tensor] : hf) names.push_back(name);
  // In rule order; the tied alias is not written.
  EXPECT_EQ(names, (std::vector<std::string>{"attn.q", "attn.kv", "moe.e0", "moe.e1", "moe.e2", "model.norm.weight",
                                             "mixer.in_proj", "g.q", "g.k", "g.v", "embed"}));
  const std::map<std::string, at::Tensor> by_name(hf.begin(), hf.end());
  EXPECT_TRUE(at::equal(by_name.at("attn.q"), parameters_["attn.qkv"].narrow(0, 0, 2)));
  EXPECT_TRUE(at::equal(by_name.at("attn.kv"), parameters_["attn.qkv"].narrow(0, 2, 4)));
  EXPECT_TRUE(at::equal(by_name.at("moe.e1"), parameters_["moe.experts"][1]));
  EXPECT_EQ(by_name.at("moe.e2").sizes().vec(), (std::vector<int64_t>{2, 2}));
  EXPECT_TRUE(at::equal(by_name.at("mixer.in_proj"), parameters_["mixer.in_proj"].reshape({6, 2})));
  // Group 1's two q rows are q's rows 2 and 3; its k row is k's row 1.
  const at::Tensor& grouped = parameters_["attn.grouped"];
  EXPECT_EQ(by_name.at("g.q").sizes().vec(), (std::vector<int64_t>{4, 3}));
  EXPECT_TRUE(at::equal(by_name.at("g.q").narrow(0, 2, 2), grouped[1].narrow(0, 0, 2)));
  EXPECT_TRUE(at::equal(by_name.at("g.k")[1], grouped[1][2]));
  EXPECT_TRUE(at::equal(by_name.at("g.v")[0], grouped[0][3]));

  const TensorMap::Weights back = map.read(HfWeights(folder_with(hf)), "config.json");
  EXPECT_EQ(back.dtype, at::kFloat);
  ASSERT_EQ(back.parameters.size(), parameters_.size());
  for (const auto& [name, tensor] : parameters_) EXPECT_TRUE(at::equal(back.parameters.at(name), tensor)) << name;
}

// One HF tensor holding several parts (Mamba-2's in_proj rows z, x, B): the parameter [2 groups,
// 2 + 2 + 1 rows, 3] groups them, the HF tensor [4 + 4 + 2, 3] holds all z rows, then x, then B.
TEST_F(TensorMapTest, InterleavesThePartsOfOneTensor) {
  const TensorMap map({HfTensorRule::interleave("mixer.grouped", {2, 5, 3}, 1, {"in", "in", "in"}, {2, 2, 1})},
                      "test plugin");
  const at::Tensor grouped = at::randn({2, 5, 3});
  const TensorMap::Tensors tensors = map.write({{"mixer.grouped", grouped}}, at::kFloat, "test");
  ASSERT_EQ(tensors.entries.size(), 1u);
  EXPECT_EQ(tensors.entries[0].shape, (std::vector<int64_t>{10, 3}));
  const at::Tensor hf = tensors.tensor_of(0);
  EXPECT_TRUE(at::equal(hf.narrow(0, 2, 2), grouped[1].narrow(0, 0, 2)));  // group 1's z rows
  EXPECT_TRUE(at::equal(hf.narrow(0, 4, 2), grouped[0].narrow(0, 2, 2)));  // group 0's x rows
  EXPECT_TRUE(at::equal(hf[9], grouped[1][4]));                            // group 1's B row
  const TensorMap::Weights back = map.read(HfWeights(folder_with({{"in", hf}})), "config.json");
  EXPECT_TRUE(at::equal(back.parameters.at("mixer.grouped"), grouped));
  const std::string folder = folder_with({{"in", hf.narrow(0, 0, 9)}});
  const std::string message = error_of<triax::Error>([&] { map.read(HfWeights(folder), "config.json"); });
  EXPECT_NE(message.find("tensor 'in' has shape [9, 3], but config.json implies [10, 3]"), std::string::npos)
      << message;
}

TEST_F(TensorMapTest, WritesInTheRequestedDtype) {
  const TensorMap map(rules(), "test plugin");
  for (const auto& [name, tensor] : written(map, at::kBFloat16)) EXPECT_EQ(tensor.scalar_type(), at::kBFloat16) << name;
  const TensorMap::Weights back = map.read(HfWeights(folder_with(written(map, at::kBFloat16))), "config.json");
  EXPECT_EQ(back.dtype, at::kBFloat16);
}

TEST_F(TensorMapTest, IgnoredOptionalAndTiedTensors) {
  const TensorMap map(rules(), "test plugin");
  auto hf = written(map);
  hf.push_back({"layers.3.rotary.inv_freq", at::ones({2})});       // ignored by its glob
  hf.push_back({"lm_head.weight", parameters_["embed"].clone()});  // an equal tied head: accepted
  EXPECT_EQ(map.read(HfWeights(folder_with(hf)), "config.json").parameters.size(), 6u);

  hf.back().second = parameters_["embed"] + 1;
  const std::string folder = folder_with(hf);
  const std::string message = error_of<triax::Error>([&] { map.read(HfWeights(folder), "config.json"); });
  EXPECT_NE(message.find(folder + "/model.safetensors: tensor 'lm_head.weight' differs from the parameter 'embed'"),
            std::string::npos)
      << message;

  // An optional rule whose tensors are all absent reads nothing.
  std::vector<HfTensorRule> with_optional = rules();
  with_optional.push_back(HfTensorRule::rename("extra", {3}).as_optional());
  const TensorMap optional_map(with_optional, "test plugin");
  EXPECT_EQ(optional_map.read(HfWeights(folder_with(written(map))), "config.json").parameters.count("extra"), 0u);
}

TEST_F(TensorMapTest, ReadRefusalsNameTheFileAndTheTensor) {
  const TensorMap map(rules(), "test plugin");
  auto refused = [&](std::vector<std::pair<std::string, at::Tensor>> hf) {
    const std::string folder = folder_with(hf);
    return std::make_pair(folder + "/model.safetensors",
                          error_of<triax::Error>([&] { map.read(HfWeights(folder), "cfg.json"); }));
  };
  auto hf = written(map);
  hf.erase(hf.begin() + 3);  // moe.e1
  auto [file, message] = refused(hf);
  EXPECT_NE(message.find(file + ": tensor 'moe.e1' is missing (cfg.json implies shape [2, 2])"), std::string::npos)
      << message;

  hf = written(map);
  hf[1].second = at::zeros({3, 2});  // attn.kv
  std::tie(file, message) = refused(hf);
  EXPECT_NE(message.find(file + ": tensor 'attn.kv' has shape [3, 2], but cfg.json implies [4, 2]"), std::string::npos)
      << message;

  hf = written(map);
  hf[0].second = hf[0].second.to(at::kDouble);
  std::tie(file, message) = refused(hf);
  EXPECT_NE(message.find(file + ": tensor 'attn.q': dtype F64 is not supported"), std::string::npos) << message;

  hf = written(map);
  hf.push_back({"surprise.weight", at::ones({1})});
  std::tie(file, message) = refused(hf);
  EXPECT_NE(message.find(file + ": unexpected tensor 'surprise.weight'"), std::string::npos) << message;
}

TEST_F(TensorMapTest, WriteRefusalsNameTheTensor) {
  const TensorMap map(rules(), "test plugin");
  auto parameters = parameters_;
  parameters["attn.qkv"] = at::zeros({5, 2});
  std::string message = error_of<triax::Error>([&] { map.write(parameters, at::kFloat, "out"); });
  EXPECT_NE(message.find("out: tensor 'attn.qkv' has shape [5, 2], but test plugin's tensor map implies [6, 2]"),
            std::string::npos)
      << message;
  parameters = parameters_;
  parameters.erase("norm.weight");
  message = error_of<triax::Error>([&] { map.write(parameters, at::kFloat, "out"); });
  EXPECT_NE(message.find("out: tensor 'norm.weight' is missing"), std::string::npos) << message;
  parameters = parameters_;
  parameters["other"] = at::zeros({1});
  message = error_of<triax::Error>([&] { map.write(parameters, at::kFloat, "out"); });
  EXPECT_NE(message.find("out: unexpected tensor 'other'"), std::string::npos) << message;
}

TEST_F(TensorMapTest, MalformedRulesAreRefusedNamingTheOwner) {
  auto refused = [](HfTensorRule rule) {
    return error_of<triax::Error>([&] { TensorMap({rule}, "model plugin 'x'"); });
  };
  EXPECT_NE(refused(HfTensorRule::concat("p", {6, 2}, 0, {"a", "b"}, {2, 3})).find("model plugin 'x'"),
            std::string::npos);
  EXPECT_NE(refused(HfTensorRule::concat("p", {6, 2}, 0, {"a", "b"}, {2, 3})).find("do not add up"), std::string::npos);
  EXPECT_NE(refused(HfTensorRule::stack("p", {3, 2}, 0, {"a", "b"})).find("2 HF tensors stacked into [3, 2]"),
            std::string::npos);
  EXPECT_NE(refused(HfTensorRule::concat("p", {6, 2}, 2, {"a"}, {6})).find("dim 2 outside the shape"),
            std::string::npos);
  EXPECT_NE(refused(flatten("p", {6, 2}, 1)).find("dims 1 and the next outside the shape"),
            std::string::npos);
  EXPECT_NE(refused(HfTensorRule::interleave("p", {6, 2}, 0, {"a", "b"}, {2, 4})).find("needs dim >= 1"),
            std::string::npos);
  EXPECT_NE(refused(HfTensorRule::interleave("p", {2, 3, 2}, 1, {"a", "b"}, {1, 1})).find("do not add up"),
            std::string::npos);
  const std::string twice = error_of<triax::Error>([] {
    TensorMap({HfTensorRule::rename("p", {1}, "a"), HfTensorRule::rename("q", {1}, "a")}, "x");
  });
  EXPECT_NE(twice.find("claimed by two rules"), std::string::npos) << twice;
}

TEST(GlobMatch, StarMatchesAnyRun) {
  EXPECT_TRUE(triax::glob_match("model.layers.*.inv_freq", "model.layers.12.inv_freq"));
  EXPECT_TRUE(triax::glob_match("*", ""));
  EXPECT_TRUE(triax::glob_match("a*b*c", "aXbYbc"));
  EXPECT_FALSE(triax::glob_match("model.layers.*.inv_freq", "model.layers.1.weight"));
  EXPECT_FALSE(triax::glob_match("abc", "abcd"));
}

}  // namespace
