// Greedy generation of a tiny Llama on CUDA with a decoding step's norms folded into the products
// after them (TRIAX_DECODE_NORM_GEMV=1, decode_norm_gemv.hpp) gives the tokens of the unfolded
// step (DecodeNormGemvGenerationCuda, ctest label gpu, skipped without a GPU). The library reads
// the switch once a process, so the test runs this binary once each way, as the suite's Child
// test, and compares what they print: the tokens (plain and CUDA-graphed steps, fp32 and bf16, 1
// and 4 rows) and how many folded ops the plain steps ran. A third run adds programmatic dependent
// launch of the GEMVs (TRIAX_DECODE_GEMV_PDL=1): the same tokens again, graphed steps included.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cache_test_support.hpp"
#include "llama_model.hpp"
#include "llama_test_support.hpp"

namespace {

using namespace cache_test;

constexpr const char* kChildVariable = "TRIAX_DECODE_NORM_GEMV_TEST_CHILD";
constexpr int64_t kLayers = 3, kPrompt = 5, kSteps = 12, kVocab = 50;
const c10::Device kCuda(c10::kCUDA, 0);

std::shared_ptr<triax::llama::LlamaModel> build_model(c10::ScalarType dtype) {
  triax::ModelContext context = llama_test::make_context(kLayers, dtype);
  context.seed = 7;
  context.device = kCuda;
  return llama_test::build(llama_test::llama_yaml(/*hidden=*/64, /*intermediate=*/96, kLayers, kVocab, /*tied=*/false),
                           context);
}

struct Greedy {
  at::Tensor tokens;    // [rows, kSteps]
  double logits_norm;  // the L2 norm of the last step's logits: where tokens alone may not tell
};

// The greedy continuation of a random prompt, one token a step.
Greedy greedy_tokens(triax::llama::LlamaModel& model, int64_t rows, bool graphed) {
  at::NoGradGuard no_grad;
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(11);
  const at::Tensor prompt = at::randint(kVocab, {rows, kPrompt}, generator, at::kLong).to(kCuda);
  auto caches = make_caches(model, rows, kPrompt + kSteps + 1);
  at::Tensor logits = cached_logits(model, pointers(caches), prompt);
  std::vector<at::Tensor> tokens;
  for (int64_t step = 0; step < kSteps; ++step) {
    tokens.push_back(logits.select(1, -1).narrow(-1, 0, kVocab).argmax(-1, true));
    triax::StageInput input;
    input.input_ids = tokens.back();
    input.cuda_graph = graphed;
    logits = model.forward_cached(pointers(caches), input).logits;
  }
  const double norm = logits.select(1, -1).narrow(-1, 0, kVocab).to(at::kDouble).norm().item<double>();
  return {at::cat(tokens, 1).cpu(), norm};
}

// Calls of triax::decode_norm_gemv while `work` runs.
int64_t folded_ops(const std::function<void()>& work) {
  static thread_local int64_t count = 0;
  count = 0;
  auto callback = at::addThreadLocalCallback(
      at::RecordFunctionCallback([](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
        if (std::string(fn.name()) == "triax::decode_norm_gemv") ++count;
        return nullptr;
      }).scopes({at::RecordScope::FUNCTION, at::RecordScope::USER_SCOPE}));
  work();
  at::removeCallback(callback);
  return count;
}

TEST(DecodeNormGemvGenerationCuda, Child) {
  if (std::getenv(kChildVariable) == nullptr) GTEST_SKIP() << "run by GreedyTokensEqualTheUnfoldedOnes";
  ASSERT_TRUE(at::hasCUDA());
  int64_t folded = 0;
  for (const c10::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    auto model = build_model(dtype);
    for (const int64_t rows : {1, 4}) {
      Greedy plain;
      folded += folded_ops([&] { plain = greedy_tokens(*model, rows, false); });
      const Greedy graphed = greedy_tokens(*model, rows, true);
      for (const auto& [name, run] : {std::pair{"plain", plain}, std::pair{"graphed", graphed}}) {
        const std::string what = std::string(c10::toString(dtype)) + " rows " + std::to_string(rows) + " " + name;
        std::cout << "tokens " << what << ":";
        const at::Tensor& tokens = run.tokens;
        for (const int64_t id : std::vector<int64_t>(tokens.data_ptr<int64_t>(), tokens.data_ptr<int64_t>() + tokens.numel()))
          std::cout << " " << id;
        std::cout << "\nlogits " << what << ": " << std::setprecision(9) << run.logits_norm << "\n";
      }
    }
  }
  std::cout << "folded ops: " << folded << "\n";
}

// The lines the child prints with `switches` ("NAME=value ...") in its environment.
std::vector<std::string> child_lines(const std::string& switches) {
  // This binary's path: in the shell popen starts, /proc/self/exe is the shell.
  const std::string command = switches + " " + kChildVariable + "=1 " +
                              std::filesystem::read_symlink("/proc/self/exe").string() +
                              " --gtest_filter=DecodeNormGemvGenerationCuda.Child 2>&1";
  std::vector<std::string> lines;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return lines;
  std::string text;
  char buffer[4096];
  while (fgets(buffer, sizeof buffer, pipe) != nullptr) text += buffer;
  const int status = pclose(pipe);
  EXPECT_EQ(status, 0) << text;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);)
    if (line.rfind("tokens ", 0) == 0 || line.rfind("logits ", 0) == 0 || line.rfind("folded ops: ", 0) == 0)
      lines.push_back(line);
  return lines;
}

// The number after the colon of a "logits ...: value" line.
double logits_norm(const std::string& line) { return std::stod(line.substr(line.rfind(':') + 1)); }

TEST(DecodeNormGemvGenerationCuda, GreedyTokensEqualTheUnfoldedOnes) {
  if (std::getenv(kChildVariable) != nullptr) GTEST_SKIP() << "the child runs Child only";
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const std::vector<std::string> off = child_lines("TRIAX_DECODE_NORM_GEMV=0");
  const std::vector<std::string> on = child_lines("TRIAX_DECODE_NORM_GEMV=1");
  const std::vector<std::string> programmatic = child_lines("TRIAX_DECODE_NORM_GEMV=1 TRIAX_DECODE_GEMV_PDL=1");
  // 2 dtypes x 2 batch sizes x (plain, graphed) x (tokens, logits), then the count.
  ASSERT_EQ(off.size(), 17u);
  ASSERT_EQ(on.size(), 17u);
  ASSERT_EQ(programmatic.size(), 17u);
  for (size_t i = 0; i + 1 < off.size(); ++i) {
    if (off[i].rfind("tokens ", 0) == 0) {
      EXPECT_EQ(on[i], off[i]);
      EXPECT_EQ(programmatic[i], off[i]) << "with TRIAX_DECODE_GEMV_PDL=1";
      continue;
    }
    // The same bits are expected; within 1e-3 of the unfolded norm of the logits in any case.
    const double want = logits_norm(off[i]);
    EXPECT_NEAR(logits_norm(on[i]), want, 1e-3 * want) << off[i];
    EXPECT_NEAR(logits_norm(programmatic[i]), want, 1e-3 * want) << off[i] << ", TRIAX_DECODE_GEMV_PDL=1";
  }
  EXPECT_EQ(off.back(), "folded ops: 0");
  // Both norms of every layer at every plain step (the prompts have more rows than the kernel takes).
  const std::string folded = "folded ops: " + std::to_string(2 * 2 * 2 * kLayers * kSteps);
  EXPECT_EQ(on.back(), folded);
  EXPECT_EQ(programmatic.back(), folded);
}

}  // namespace
