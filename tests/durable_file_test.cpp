// Durable writes (triax/interop/durable_file.hpp): a target holds its old content or the complete new
// one, never a part; a write that fails on the way leaves no file behind.
#include "triax/interop/durable_file.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "triax/error.hpp"

namespace triax {
namespace {

namespace fs = std::filesystem;

class DurableFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = fs::temp_directory_path() / ("durable_file_test_" + std::to_string(::getpid()) + "_" +
                                           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(folder_);
    fs::create_directories(folder_);
  }
  void TearDown() override { fs::remove_all(folder_); }

  static std::string content_of(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& entry : fs::directory_iterator(folder_)) out.push_back(entry.path().filename().string());
    return out;
  }

  fs::path folder_;
};

TEST_F(DurableFileTest, CommittedContentIsCompleteAndNothingElseRemains) {
  const fs::path target = folder_ / "weights.bin";
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + 3);
  {
    DurableFile file(target);
    file.write(big.data(), big.size() / 2);
    file.write(std::string_view(big).substr(big.size() / 2));
    file.commit();
  }
  EXPECT_EQ(content_of(target), big);
  EXPECT_EQ(names(), std::vector<std::string>{"weights.bin"});
  EXPECT_EQ(fs::status(target).permissions() & fs::perms::others_read, fs::perms::others_read);
}

TEST_F(DurableFileTest, TheTargetNeverShowsAPartialFile) {
  const fs::path target = folder_ / "latest";
  write_file_durably(target, "step_00000001\n");
  {
    DurableFile file(target);
    file.write("step_000");
    // Written but not committed: the target still holds the old content, the new bytes sit
    // under the temporary name beside it.
    EXPECT_EQ(content_of(target), "step_00000001\n");
    EXPECT_EQ(file.temporary_path().parent_path(), folder_);
    EXPECT_EQ(content_of(file.temporary_path()), "step_000");
    file.write("00002\n");
    file.commit();
  }
  EXPECT_EQ(content_of(target), "step_00000002\n");
}

TEST_F(DurableFileTest, AFailureBeforeCommitLeavesNoFile) {
  const fs::path target = folder_ / "model.safetensors";
  fs::path temporary;
  try {
    DurableFile file(target);
    temporary = file.temporary_path();
    file.write("half a header");
    throw std::runtime_error("a tensor could not be read");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(fs::exists(target));
  EXPECT_FALSE(fs::exists(temporary));
  EXPECT_TRUE(names().empty());

  // An older file stays as it was.
  write_file_durably(target, "old");
  try {
    DurableFile file(target);
    file.write("new but unfinished");
    throw std::runtime_error("disk full");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(content_of(target), "old");
  EXPECT_EQ(names(), std::vector<std::string>{"model.safetensors"});
}

TEST_F(DurableFileTest, ErrorsNameTheTarget) {
  const fs::path target = folder_ / "no_such_folder" / "config.json";
  try {
    write_file_durably(target, "{}");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(target.string()), std::string::npos) << e.what();
  }
  try {
    rename_durably(folder_ / "missing", folder_ / "renamed");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("renamed"), std::string::npos) << e.what();
  }
}

TEST_F(DurableFileTest, RenameDurablyMovesAWholeFolder) {
  const fs::path building = folder_ / ".export.tmp";
  fs::create_directories(building);
  write_file_durably(building / "config.json", "{}\n");
  rename_durably(building, folder_ / "export");
  EXPECT_EQ(content_of(folder_ / "export" / "config.json"), "{}\n");
  EXPECT_FALSE(fs::exists(building));
  EXPECT_NO_THROW(sync_path(folder_ / "export"));
  EXPECT_THROW(sync_path(folder_ / "missing"), Error);
}

}  // namespace
}  // namespace triax
