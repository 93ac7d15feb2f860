#include "triax/data/nanoset_config.hpp"

#include <filesystem>

#include "triax/config_reader.hpp"
#include "triax/error.hpp"

namespace triax::data {
namespace {

// A string or a list of strings (nanotron accepts both for folders).
std::vector<std::string> string_or_list(ConfigReader& r, const std::string& key) {
  const YAML::Node node = r.raw(key);
  std::vector<std::string> out;
  if (!node.IsDefined() || node.IsNull()) return out;
  if (node.IsScalar()) {
    out.push_back(node.Scalar());
  } else if (node.IsSequence()) {
    for (const auto& item : node) {
      if (!item.IsScalar()) r.fail(key, "expected a folder path or a list of folder paths");
      out.push_back(item.Scalar());
    }
  } else {
    r.fail(key, "expected a folder path or a list of folder paths");
  }
  for (const auto& s : out)
    if (s.empty()) r.fail(key, "an empty folder path");
  return out;
}

void refuse_true(ConfigReader& r, const std::string& key, const std::string& why) {
  if (r.get<bool>(key, false)) r.fail(key, "true is not supported by triax (" + why + "); set it to false");
}

}  // namespace

std::string NanosetConfig::read_folder(size_t i) const {
  if (i < dataset_read_path.size() && std::filesystem::exists(dataset_read_path[i])) return dataset_read_path[i];
  return dataset_folder[i];
}

NanosetConfig parse_nanoset_config(const YAML::Node& dataset, const std::string& path, const std::string& origin) {
  ConfigReader r(dataset, path, origin);
  if (dataset.IsMap() && dataset["hf_dataset_or_datasets"])
    r.fail("hf_dataset_or_datasets",
           "Hugging Face datasets are not streamed by triax; tokenize them into a token folder with tools/tokenize "
           "and give its path as dataset_folder");
  NanosetConfig c;
  if (!r.contains("dataset_folder")) r.fail("dataset_folder", "required: a token folder or a list of them");
  c.dataset_folder = string_or_list(r, "dataset_folder");
  if (c.dataset_folder.empty()) r.fail("dataset_folder", "the list is empty; give at least one token folder");
  const size_t n = c.dataset_folder.size();
  const auto count_text = [&](size_t k) { return std::to_string(k) + (k == 1 ? " entry" : " entries"); };

  c.dataset_weights = r.optional<std::vector<double>>("dataset_weights");
  if (c.dataset_weights) {
    if (c.dataset_weights->size() != n)
      r.fail("dataset_weights", "has " + count_text(c.dataset_weights->size()) + ", but dataset_folder has " +
                                    count_text(n) + "; give one weight per folder");
    for (size_t i = 0; i < n; ++i)
      if (!((*c.dataset_weights)[i] > 0))
        r.fail("dataset_weights", "weight " + std::to_string(i) + " is " + std::to_string((*c.dataset_weights)[i]) +
                                      "; every weight must be positive (leave a folder out instead of weighting it 0)");
  }
  c.dataset_read_path = string_or_list(r, "dataset_read_path");
  if (!c.dataset_read_path.empty() && c.dataset_read_path.size() != n)
    r.fail("dataset_read_path",
           "has " + count_text(c.dataset_read_path.size()) + ", but dataset_folder has " + count_text(n));
  c.tokenizer_name = r.optional<std::string>("tokenizer_name");
  c.vocab_size = r.optional<int64_t>("vocab_size");
  if (c.vocab_size && *c.vocab_size < 1) r.fail("vocab_size", "must be at least 1");
  if (auto size = r.optional<int64_t>("token_size_in_bytes")) {
    if (*size != 2 && *size != 4) r.fail("token_size_in_bytes", "expected 2 (uint16 tokens) or 4 (uint32 tokens)");
    c.token_size_in_bytes = static_cast<int>(*size);
  }
  c.return_positions = r.get<bool>("return_positions", true);
  c.skip_in_stream = r.get<bool>("skip_in_stream", false);
  refuse_true(r, "pad_samples_to_global_batch_size", "every sample is a full sequence");
  c.dataset_max_tokens = r.optional<std::vector<int64_t>>("dataset_max_tokens");
  if (c.dataset_max_tokens) {
    if (c.dataset_max_tokens->size() != n)
      r.fail("dataset_max_tokens",
             "has " + count_text(c.dataset_max_tokens->size()) + ", but dataset_folder has " + count_text(n));
    for (int64_t tokens : *c.dataset_max_tokens)
      if (tokens < 1) r.fail("dataset_max_tokens", "every entry must be at least 1");
  }
  c.shuffle_files = r.get<bool>("shuffle_files", false);
  refuse_true(r, "use_old_brrr_dataloader", "it is a nanotron-internal loader");
  r.finish();
  c.resolved = YAML::Clone(r.resolved());
  return c;
}

}  // namespace triax::data
