// Document masking and the sliding window (model_config._use_doc_masking, sliding_window_size) on
// the tiny Llama, fp32 on the CPU: a row packing several documents computes what each document
// run alone computes (logits, and the loss nanotron's label mask gives); a windowed model equals
// the double-precision reference with an explicitly built window mask; both together; generation
// through the cache past the window equals the full windowed forward; and the refusals of a bad
// window, naming the key.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cache_test_support.hpp"
#include "llama_test_support.hpp"
#include "triax/error.hpp"
#include "triax/layers/attention_mask.hpp"

namespace {

using namespace llama_test;

constexpr int64_t kLayers = 2;

// In-document positions of one row packing documents of these lengths, [1, sum of lengths].
at::Tensor document_positions(const std::vector<int64_t>& lengths) {
  std::vector<at::Tensor> parts;
  for (int64_t length : lengths) parts.push_back(at::arange(length, at::kLong));
  return at::cat(parts).unsqueeze(0);
}

at::Tensor packed_logits(LlamaModel& model, const at::Tensor& ids, const at::Tensor& positions) {
  at::NoGradGuard no_grad;
  triax::StageInput input;
  input.input_ids = ids;
  input.position_ids = positions;
  input.want_logits = true;
  return model.forward(input).logits;
}

// Each document of each row run alone equals its part of the packed forward.
void expect_documents_run_alone(LlamaModel& packed_model, LlamaModel& alone_model, const at::Tensor& ids,
                                const std::vector<std::vector<int64_t>>& documents) {
  std::vector<at::Tensor> rows;
  for (const auto& lengths : documents) rows.push_back(document_positions(lengths));
  const at::Tensor logits = packed_logits(packed_model, ids, at::cat(rows, 0));
  for (size_t r = 0; r < documents.size(); ++r) {
    int64_t start = 0;
    for (int64_t length : documents[r]) {
      const at::Tensor alone = cache_test::full_logits(alone_model, ids.narrow(0, r, 1).narrow(1, start, length));
      EXPECT_LT(max_abs_diff(logits.narrow(0, r, 1).narrow(1, start, length), alone), 1e-5)
          << "row " << r << ", document at " << start;
      start += length;
    }
  }
}

TEST(DocumentMasking, PackedRowsEqualEachDocumentAlone) {
  auto masked = build(tiny_yaml(false, "_use_doc_masking: true\n"), make_context(kLayers, at::kFloat, "{std: 0.2}"));
  auto plain = build(tiny_yaml(false), make_context(kLayers, at::kFloat, "{std: 0.2}"));
  const at::Tensor ids = make_batch(2, 12, 30, 3).ids;
  expect_documents_run_alone(*masked, *plain, ids, {{5, 4, 3}, {1, 7, 4}});
  // Not vacuous: without document masking the later documents see the earlier ones.
  const at::Tensor unmasked = cache_test::full_logits(*plain, ids);
  const at::Tensor alone = cache_test::full_logits(*plain, ids.narrow(0, 0, 1).narrow(1, 5, 4));
  EXPECT_GT(max_abs_diff(unmasked.narrow(0, 0, 1).narrow(1, 5, 4), alone), 1e-3);
}

// The training path (fused head and loss): nanotron's label mask leaves out the label that
// starts the next document; the loss is the mean over the documents' own predictions.
TEST(DocumentMasking, TrainingLossIsTheDocumentsOwn) {
  auto masked = build(tiny_yaml(false, "_use_doc_masking: true\n"), make_context(kLayers, at::kFloat, "{std: 0.2}"));
  const Batch two = make_batch(2, 12, 30, 4);
  const Batch batch{two.ids.narrow(0, 0, 1), two.labels.narrow(0, 0, 1), at::Tensor()};
  const at::Tensor positions = document_positions({5, 7});
  triax::StageInput input;
  input.input_ids = batch.ids;
  input.label_ids = batch.labels;
  input.position_ids = positions;
  input.label_mask = at::ones({1, 12}, at::kFloat);
  input.label_mask[0][4] = 0.0;  // the label after document 0's last token is document 1's first
  const at::Tensor loss = masked->forward(input).loss;
  // The reference: each document alone through the double-precision reference. Document 0
  // counts the labels of its first 4 tokens (causal: token 4 changes none of them), document 1
  // all 7; the loss is the mean over the 11.
  const auto p = parameters_by_name(*masked);
  const LlamaConfig c = read_config(tiny_yaml(false));
  const at::Tensor first = ref_loss(p, c, batch.ids.narrow(1, 0, 4), batch.labels.narrow(1, 0, 4), at::ones({1, 4}));
  const at::Tensor second = ref_loss(p, c, batch.ids.narrow(1, 5, 7), batch.labels.narrow(1, 5, 7), at::ones({1, 7}));
  const double expected = (first.item<double>() * 4 + second.item<double>() * 7) / 11;
  EXPECT_NEAR(loss.item<double>(), expected, 1e-5);
  EXPECT_THROW(
      {
        triax::StageInput without = input;
        without.position_ids = at::Tensor();
        masked->forward(without);
      },
      triax::Error);
}

TEST(SlidingWindow, EqualsTheExplicitMaskReference) {
  const Batch batch = make_batch(2, 12, 30, 5);
  const LlamaConfig c = read_config(tiny_yaml(false));
  for (int64_t window : {1, 3, 12}) {
    auto model = build(tiny_yaml(false, "sliding_window_size: " + std::to_string(window) + "\n"),
                       make_context(kLayers, at::kFloat, "{std: 0.2}"));
    const at::Tensor loss = model->forward(stage_input(batch)).loss;
    const at::Tensor expected = ref_loss(parameters_by_name(*model), c, batch.ids, batch.labels, batch.mask, window);
    EXPECT_NEAR(loss.item<double>(), expected.item<double>(), 1e-5) << "window " << window;
    if (window < 12) {  // a window shorter than the sequence changes the result
      const at::Tensor causal = ref_loss(parameters_by_name(*model), c, batch.ids, batch.labels, batch.mask);
      EXPECT_GT(std::abs(causal.item<double>() - expected.item<double>()), 1e-4) << "window " << window;
    }
  }
}

TEST(SlidingWindow, MaskKeepsTheLastWindowKeys) {
  const at::Tensor index = at::arange(6, at::kLong);
  const at::Tensor visible = triax::causal_visibility(index, index, 3);
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < 6; ++j) EXPECT_EQ(visible[i][j].item<bool>(), j <= i && j > i - 3) << i << ", " << j;
}

TEST(SlidingWindow, WithDocumentsBothApply) {
  const std::string window = "sliding_window_size: 3\n";
  auto masked = build(tiny_yaml(false, window + "_use_doc_masking: true\n"),
                      make_context(kLayers, at::kFloat, "{std: 0.2}"));
  auto windowed = build(tiny_yaml(false, window), make_context(kLayers, at::kFloat, "{std: 0.2}"));
  expect_documents_run_alone(*masked, *windowed, make_batch(2, 12, 30, 6).ids, {{6, 6}, {2, 9, 1}});
}

// Generation through the cache keeps the window: past it, the oldest keys drop out.
TEST(SlidingWindow, CachedGenerationPastTheWindowEqualsTheFullForward) {
  auto model = build(tiny_yaml(false, "sliding_window_size: 4\n"), make_context(kLayers, at::kFloat, "{std: 0.2}"));
  const at::Tensor ids = make_batch(2, 12, 30, 7).ids;
  const at::Tensor expected = cache_test::full_logits(*model, ids);
  auto caches = cache_test::make_caches(*model, 2, 16);
  std::vector<at::Tensor> pieces{cache_test::cached_logits(*model, cache_test::pointers(caches), ids.narrow(1, 0, 5))};
  for (int64_t t = 5; t < 12; ++t)
    pieces.push_back(cache_test::cached_logits(*model, cache_test::pointers(caches), ids.narrow(1, t, 1)));
  EXPECT_LT(max_abs_diff(at::cat(pieces, 1), expected), 1e-5);
}

std::string block_costs_error(const std::string& extra, int64_t sequence_length = 16) {
  try {
    ConfigReader reader = ConfigReader::from_text(tiny_yaml(false, extra), "model.model_config");
    LlamaModel::block_costs(reader, sequence_length);
  } catch (const triax::ConfigError& e) {
    return e.what();
  }
  return "(no ConfigError)";
}

TEST(SlidingWindow, BadWindowsAreRefusedNamingTheKey) {
  for (const char* bad : {"0", "-2"}) {
    const std::string message = block_costs_error(std::string("sliding_window_size: ") + bad + "\n");
    EXPECT_NE(message.find("model.model_config.sliding_window_size: must be at least 1"), std::string::npos) << message;
  }
  const std::string longer = block_costs_error("sliding_window_size: 17\n", 16);
  EXPECT_NE(longer.find("model.model_config.sliding_window_size: is 17, longer than tokens.sequence_length (16)"),
            std::string::npos)
      << longer;
  EXPECT_EQ(block_costs_error("sliding_window_size: 16\n", 16), "(no ConfigError)");
  EXPECT_EQ(block_costs_error("sliding_window_size: 16\n", 1), "(no ConfigError)");  // triax generate's question
  EXPECT_EQ(block_costs_error("sliding_window_size: null\n_use_doc_masking: true\n"), "(no ConfigError)");
  EXPECT_NE(block_costs_error("_use_doc_masking: 3\n").find("model.model_config._use_doc_masking"), std::string::npos);
}

}  // namespace
