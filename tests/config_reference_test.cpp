// The configuration reference against the loader (config_reference/config_reference.hpp): they agree,
// and each kind of drift is caught and named: a documented key the loader does not read, a key
// the loader reads that is not documented, a wrong bound, a wrong choice, a wrong required flag.
#include "config_reference/config_reference.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace triax::config_reference {
namespace {

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

Key& key_of(Reference& reference, const std::string& section, const std::string& name) {
  for (Section& s : reference.sections)
    if (s.path == section)
      for (Key& k : s.keys)
        if (k.name == name) return k;
  throw std::runtime_error("no key " + section + "." + name);
}

Section& section_of(Reference& reference, const std::string& path) {
  for (Section& s : reference.sections)
    if (s.path == path) return s;
  throw std::runtime_error("no section " + path);
}

// The drift of a copy of the reference changed by `edit`: exactly one message, naming `expected`.
void expect_one_problem(const std::function<void(Reference&)>& edit, const std::string& expected) {
  Reference changed = reference();
  edit(changed);
  const std::vector<std::string> problems = find_reference_drift(changed);
  ASSERT_EQ(problems.size(), 1u) << joined(problems);
  EXPECT_NE(problems[0].find(expected), std::string::npos) << problems[0];
}

TEST(ConfigReference, AgreesWithTheLoader) {
  const std::vector<std::string> problems = find_reference_drift(reference());
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

TEST(ConfigReference, DocumentsEveryKeyOnce) {
  std::vector<std::string> paths;
  for (const Section& s : reference().sections)
    for (const Key& k : s.keys) paths.push_back(s.path + "." + k.name);
  std::sort(paths.begin(), paths.end());
  EXPECT_EQ(std::adjacent_find(paths.begin(), paths.end()), paths.end());
  EXPECT_GT(paths.size(), 100u);
}

TEST(ConfigReference, AKeyTheLoaderDoesNotReadIsNamed) {
  expect_one_problem(
      [](Reference& r) { section_of(r, "general").keys.emplace_back("retries", integer(0), "triax", ""); },
      "general.retries is documented, but the loader does not read it");
}

TEST(ConfigReference, AnUndocumentedKeyIsNamed) {
  expect_one_problem(
      [](Reference& r) {
        std::vector<Key>& keys = section_of(r, "profiler").keys;
        keys.erase(std::find_if(keys.begin(), keys.end(), [](const Key& k) { return k.name == "skip_first"; }));
      },
      "profiler.skip_first is read by the loader, but the reference does not document it");
}

TEST(ConfigReference, AWrongMinimumIsNamed) {
  expect_one_problem(
      [](Reference& r) { key_of(r, "tokens", "micro_batch_size").type = integer(2); },
      "tokens.micro_batch_size = 1 is refused by the reference (below its minimum), but the loader accepts it");
}

TEST(ConfigReference, AMissingChoiceIsNamed) {
  expect_one_problem(
      [](Reference& r) {
        key_of(r, "logging", "progress").type = choice({"auto", "always", "never", "sometimes"});
      },
      "logging.progress = sometimes is allowed by the reference, but the loader refuses it");
}

TEST(ConfigReference, AWrongRequiredFlagIsNamed) {
  expect_one_problem([](Reference& r) { key_of(r, "parallelism", "dp").must_be_given(); },
                     "parallelism.dp is documented as required, but the loader does not need it");
}

TEST(ConfigReference, ATokenFolderKeyIsChecked) {
  expect_one_problem(
      [](Reference& r) { key_of(r, "data_stages[].data.dataset", "vocab_size").type = integer(0).or_null(); },
      "data_stages[].data.dataset.vocab_size = 0 is allowed by the reference, but the loader refuses it");
}

TEST(ConfigReference, RendersEveryKeyWithTheLoadersDefault) {
  const std::string text = render_markdown(reference());
  EXPECT_NE(text.find("| `seed` | int ≥ 0 | `42` | nanotron |"), std::string::npos);
  EXPECT_NE(text.find("| `comm_timeout_seconds` | number > 0 | `300` | **triax** |"), std::string::npos);
  EXPECT_NE(text.find("| `preemption_signals` | list of `SIGTERM`"), std::string::npos);
  for (const Section& s : reference().sections)
    for (const Key& k : s.keys) EXPECT_NE(text.find("| `" + k.name + "` |"), std::string::npos) << k.name;
}

}  // namespace
}  // namespace triax::config_reference
