#include "triax/data/tokenizer_identity.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace triax::data {
namespace {

namespace fs = std::filesystem;

std::string file_identity(const fs::path& file) {
  std::ifstream in(file);
  const nlohmann::json parsed = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {  // not JSON: the bytes themselves
    std::ifstream raw(file, std::ios::binary);
    return "file:" + std::string(std::istreambuf_iterator<char>(raw), std::istreambuf_iterator<char>());
  }
  return "json:" + parsed.dump();
}

}  // namespace

std::string tokenizer_identity(const std::string& recorded, const std::string& folder) {
  std::error_code ec;
  if (!recorded.empty() && fs::is_regular_file(recorded, ec)) return file_identity(recorded);
  const fs::path beside = fs::path(folder) / "tokenizer.json";
  if (!folder.empty() && fs::path(recorded).filename() == "tokenizer.json" && fs::is_regular_file(beside, ec))
    return file_identity(beside);
  return "name:" + recorded;
}

}  // namespace triax::data
