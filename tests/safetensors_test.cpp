// safetensors I/O: bit-exact round trips of every dtype, the byte layout the format documents,
// and a named error for each kind of malformed file.
#include "triax/interop/safetensors.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "triax/error.hpp"

namespace fs = std::filesystem;
using triax::interop::SafetensorsFile;
using Json = nlohmann::json;

namespace {

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = fs::temp_directory_path() / ("triax_safetensors_" + std::to_string(::getpid()) + "_" +
                                           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(folder_);
    fs::create_directories(folder_);
  }
  void TearDown() override { fs::remove_all(folder_); }

  std::string path(const std::string& name) const { return (folder_ / name).string(); }

  static std::string read_bytes(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // A file made by hand: the 8-byte length, the header text as given, then `buffer`.
  std::string handmade(const std::string& name, const std::string& header, const std::string& buffer,
                       std::optional<uint64_t> length = std::nullopt) {
    const std::string file = path(name);
    std::ofstream out(file, std::ios::binary);
    const uint64_t n = length.value_or(header.size());
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << header << buffer;
    return file;
  }

  // Opening `file` fails with a message holding every one of `parts`.
  static void expect_refused(const std::string& file, std::initializer_list<std::string> parts) {
    try {
      SafetensorsFile opened(file);
      ADD_FAILURE() << file << " was accepted";
    } catch (const triax::Error& e) {
      const std::string message = e.what();
      for (const std::string& part : parts) EXPECT_NE(message.find(part), std::string::npos) << message;
    }
  }

  fs::path folder_;
};

// Random bytes of every representable value, NaN and denormal patterns included.
at::Tensor random_tensor(at::ScalarType dtype, std::vector<int64_t> shape) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (dtype == at::kBool) return at::randint(0, 2, shape, at::kByte).to(at::kBool);
  const int64_t bytes = numel * static_cast<int64_t>(c10::elementSize(dtype));
  at::Tensor raw = at::randint(0, 256, {bytes}, at::kByte);
  return raw.view(dtype).reshape(shape);
}

bool same_bytes(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  at::Tensor x = a.contiguous();
  at::Tensor y = b.contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

const std::vector<std::pair<std::string, at::ScalarType>> kDtypes = {
    {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf}, {"BF16", at::kBFloat16}, {"I64", at::kLong},
    {"I32", at::kInt},    {"I16", at::kShort}, {"I8", at::kChar},  {"U8", at::kByte},       {"BOOL", at::kBool},
};

TEST_F(SafetensorsTest, EveryDtypeRoundTripsBitExactly) {
  at::manual_seed(7);
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const auto& [name, dtype] : kDtypes) {
    tensors.push_back({"matrix." + name, random_tensor(dtype, {5, 3})});
    tensors.push_back({"cube." + name, random_tensor(dtype, {2, 3, 7})});
    tensors.push_back({"scalar." + name, random_tensor(dtype, {})});
    tensors.push_back({"empty." + name, random_tensor(dtype, {0, 4})});
  }
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "a \"quoted\" value"}};
  triax::interop::write_safetensors(path("all.safetensors"), tensors, metadata);

  SafetensorsFile file(path("all.safetensors"));
  EXPECT_EQ(file.metadata(), metadata);
  EXPECT_EQ(file.names().size(), tensors.size());
  for (const auto& [name, tensor] : tensors) {
    ASSERT_TRUE(file.contains(name)) << name;
    EXPECT_EQ(file.dtype(name), tensor.scalar_type()) << name;
    EXPECT_EQ(file.shape(name), tensor.sizes().vec()) << name;
    EXPECT_EQ(file.nbytes(name), static_cast<int64_t>(tensor.nbytes())) << name;
    at::Tensor read = file.read(name);
    EXPECT_TRUE(same_bytes(read, tensor)) << name;
  }
  for (const auto& [suffix, dtype] : kDtypes) EXPECT_EQ(triax::interop::safetensors_dtype_name(dtype), suffix);
}

TEST_F(SafetensorsTest, NonContiguousTensorsAreWrittenInRowMajorOrder) {
  at::Tensor base = at::arange(12, at::kFloat).reshape({3, 4});
  triax::interop::write_safetensors(path("t.safetensors"),
                                    {{"transposed", base.t()}, {"strided", base.slice(1, 0, 4, 2)}});
  SafetensorsFile file(path("t.safetensors"));
  EXPECT_TRUE(at::equal(file.read("transposed"), base.t().contiguous()));
  EXPECT_TRUE(at::equal(file.read("strided"), base.slice(1, 0, 4, 2).contiguous()));
}

// The bytes, as the format documents them: u64 little-endian header length, a JSON header padded
// with spaces to a multiple of 8, then the tensors at their data_offsets; wider elements first.
TEST_F(SafetensorsTest, HeaderLayoutIsTheDocumentedOne) {
  at::Tensor bytes = at::tensor({1, 2, 3}, at::kByte);                        // 3 bytes
  at::Tensor halves = at::tensor({1.5, -2.0}, at::kFloat).to(at::kBFloat16);  // 4 bytes
  at::Tensor doubles = at::tensor({0.25, 8.0}, at::kDouble);                  // 16 bytes
  triax::interop::write_safetensors(path("layout.safetensors"),
                                    {{"bytes", bytes}, {"halves", halves}, {"doubles", doubles}}, {{"k", "v"}});
  const std::string raw = read_bytes(path("layout.safetensors"));

  ASSERT_GE(raw.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(raw[i]);  // little-endian
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(raw.size(), 8 + n + 16 + 4 + 3);
  const std::string header = raw.substr(8, n);
  EXPECT_EQ(header.front(), '{');
  const size_t last = header.find_last_not_of(' ');
  EXPECT_EQ(header[last], '}');
  EXPECT_LT(header.size() - 1 - last, 8u);  // at most 7 spaces of padding

  const Json parsed = Json::parse(header);
  const Json expected = {
      {"__metadata__", {{"k", "v"}}},
      {"doubles", {{"dtype", "F64"}, {"shape", {2}}, {"data_offsets", {0, 16}}}},
      {"halves", {{"dtype", "BF16"}, {"shape", {2}}, {"data_offsets", {16, 20}}}},
      {"bytes", {{"dtype", "U8"}, {"shape", {3}}, {"data_offsets", {20, 23}}}},
  };
  EXPECT_EQ(parsed, expected) << header;

  const char* buffer = raw.data() + 8 + n;
  EXPECT_EQ(std::memcmp(buffer, doubles.data_ptr(), 16), 0);
  EXPECT_EQ(std::memcmp(buffer + 16, halves.data_ptr(), 4), 0);
  EXPECT_EQ(std::memcmp(buffer + 20, bytes.data_ptr(), 3), 0);
  // bf16 1.5 is 0x3FC0, stored low byte first.
  EXPECT_EQ(static_cast<unsigned char>(buffer[16]), 0xC0);
  EXPECT_EQ(static_cast<unsigned char>(buffer[17]), 0x3F);
}

TEST_F(SafetensorsTest, ReadsAHandmadeFile) {
  // Offsets not in name order, no metadata, header not padded: still a valid file.
  const float values[2] = {3.0f, -1.0f};
  const int16_t small[1] = {-7};
  std::string buffer(reinterpret_cast<const char*>(small), 2);
  buffer.append(reinterpret_cast<const char*>(values), 8);
  const std::string file = handmade(
      "ok.safetensors",
      R"({"z":{"dtype":"I16","shape":[1],"data_offsets":[0,2]},"a":{"dtype":"F32","shape":[2],"data_offsets":[2,10]}})",
      buffer);
  SafetensorsFile opened(file);
  EXPECT_EQ(opened.names(), (std::vector<std::string>{"z", "a"}));  // buffer order
  EXPECT_TRUE(at::equal(opened.read("a"), at::tensor({3.0f, -1.0f})));
  EXPECT_EQ(opened.read("z").item<int16_t>(), -7);
  EXPECT_TRUE(opened.metadata().empty());
  try {
    opened.read("missing");
    ADD_FAILURE();
  } catch (const triax::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'missing'"), std::string::npos);
  }
}

TEST_F(SafetensorsTest, TruncatedFilesAreRefused) {
  triax::interop::write_safetensors(path("whole.safetensors"), {{"w", at::ones({4, 4})}});
  const std::string raw = read_bytes(path("whole.safetensors"));
  const std::string cut = path("cut.safetensors");
  std::ofstream(cut, std::ios::binary) << raw.substr(0, raw.size() - 5);
  expect_refused(cut, {cut, "tensor 'w'", "outside"});

  const std::string tiny = path("tiny.safetensors");
  std::ofstream(tiny, std::ios::binary) << raw.substr(0, 5);
  expect_refused(tiny, {tiny, "shorter than the 8-byte header length"});

  std::ofstream(path("empty.safetensors"), std::ios::binary).flush();
  expect_refused(path("empty.safetensors"), {path("empty.safetensors"), "not a safetensors file"});
}

TEST_F(SafetensorsTest, HeaderLengthPastTheEndIsRefused) {
  const std::string file = handmade("long.safetensors", "{}", "", uint64_t{1} << 40);
  expect_refused(file, {file, "header length 1099511627776 runs past the end"});
}

TEST_F(SafetensorsTest, BadJsonIsRefused) {
  const std::string file = handmade("json.safetensors", R"({"w": {"dtype": "F32", )", "");
  expect_refused(file, {file, "not valid JSON"});
  const std::string list = handmade("list.safetensors", "[1, 2]  ", "");
  expect_refused(list, {list, "not a JSON object"});
  const std::string twice = handmade(
      "twice.safetensors",
      R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
      "ab");
  expect_refused(twice, {twice, "duplicate key 'w'"});
}

TEST_F(SafetensorsTest, OffsetsOutOfRangeAreRefused) {
  const std::string file =
      handmade("range.safetensors", R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})", "abcd");
  expect_refused(file, {file, "tensor 'w'", "outside the 4-byte data buffer"});
  const std::string backwards =
      handmade("backwards.safetensors", R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[3,1]}})", "abcd");
  expect_refused(backwards, {backwards, "tensor 'w'", "outside"});
  const std::string negative =
      handmade("negative.safetensors", R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}})", "a");
  expect_refused(negative, {negative, "tensor 'w'", "data_offsets"});
}

TEST_F(SafetensorsTest, OverlapsAndHolesAreRefused) {
  const std::string overlap = handmade(
      "overlap.safetensors",
      R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},"b":{"dtype":"U8","shape":[3],"data_offsets":[1,4]}})",
      "abcd");
  expect_refused(overlap, {overlap, "tensors 'a' and 'b' overlap"});
  const std::string hole = handmade(
      "hole.safetensors",
      R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[3,4]}})",
      "abcd");
  expect_refused(hole, {hole, "belong to no tensor (before tensor 'b')"});
  const std::string tail =
      handmade("tail.safetensors", R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "abcd");
  expect_refused(tail, {tail, "bytes 1 to 4 at the end of the data buffer belong to no tensor"});
}

TEST_F(SafetensorsTest, SizeMismatchIsRefused) {
  const std::string file = handmade("size.safetensors", R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})",
                                    std::string(12, 'x'));
  expect_refused(file, {file, "tensor 'w'", "span 12 bytes", "needs 16"});
}

TEST_F(SafetensorsTest, UnknownDtypesAndMalformedEntriesAreRefused) {
  const std::string fp8 =
      handmade("fp8.safetensors", R"({"w":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})", "a");
  expect_refused(fp8, {fp8, "tensor 'w'", "unsupported dtype \"F8_E4M3\""});
  const std::string missing = handmade("missing.safetensors", R"({"w":{"dtype":"U8","shape":[1]}})", "a");
  expect_refused(missing, {missing, "tensor 'w'", "missing field 'data_offsets'"});
  const std::string extra =
      handmade("extra.safetensors", R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"scale":2}})", "a");
  expect_refused(extra, {extra, "tensor 'w'", "unknown field 'scale'"});
  const std::string shape =
      handmade("shape.safetensors", R"({"w":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}})", "a");
  expect_refused(shape, {shape, "tensor 'w'", "shape"});
  const std::string metadata = handmade("metadata.safetensors", R"({"__metadata__":{"n":3}})", "");
  expect_refused(metadata, {metadata, "__metadata__['n'] is not a string"});
}

TEST_F(SafetensorsTest, WriterRefusesBadInputAndLeavesNoFile) {
  const std::string file = path("bad.safetensors");
  auto expect_write_refused = [&](const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                                  const std::string& part) {
    try {
      triax::interop::write_safetensors(file, tensors);
      ADD_FAILURE() << "accepted: " << part;
    } catch (const triax::Error& e) {
      EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_write_refused({{"a", at::ones({1})}, {"a", at::ones({2})}}, "tensor 'a': given twice");
  expect_write_refused({{"c", at::ones({1}, at::kComplexFloat)}}, "tensor 'c': safetensors cannot hold dtype");
  expect_write_refused({{"__metadata__", at::ones({1})}}, "reserved");
  expect_write_refused({{"u", at::Tensor()}}, "tensor 'u': no tensor given");

  // A producer that returns the wrong tensor halfway: the partial file is removed.
  const std::vector<triax::interop::SafetensorsEntry> entries = {{"first", at::kFloat, {2}},
                                                                 {"second", at::kFloat, {3}}};
  try {
    triax::interop::write_safetensors(file, entries, [](size_t i) { return at::ones({i == 0 ? 2 : 4}); });
    ADD_FAILURE();
  } catch (const triax::Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'second': expected shape [3], got [4]"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(fs::is_empty(folder_)) << "a failed write left a file behind";
}

TEST_F(SafetensorsTest, RewritingReplacesTheFileWhole) {
  triax::interop::write_safetensors(path("w.safetensors"), {{"x", at::ones({1000})}});
  triax::interop::write_safetensors(path("w.safetensors"), {{"y", at::zeros({2})}});
  SafetensorsFile file(path("w.safetensors"));
  EXPECT_EQ(file.names(), std::vector<std::string>{"y"});
  EXPECT_EQ(std::distance(fs::directory_iterator(folder_), fs::directory_iterator()), 1);
}

}  // namespace
