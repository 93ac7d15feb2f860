// The Mamba plugin's decoding step on a GPU (MambaCacheCuda, ctest label gpu; skipped without
// one): the fused step's logits, a prompt then one token at a time, follow those of one full
// forward (fp32 and bf16), and the same steps run as a CUDA graph (StageInput::cuda_graph) give
// the logits of the ungraphed steps exactly, the states written in place at the addresses the
// graph recorded; the steps with the decoding fusions on (the default) follow those with them off.
#include <gtest/gtest.h>

#include <vector>

#include "cache_test_support.hpp"
#include "mamba_test_support.hpp"
#include "triax/inference_cache.hpp"

namespace {

using namespace cache_test;
using namespace mamba_test;

const c10::Device kCuda(c10::kCUDA, 0);

ModelContext gpu_context(c10::ScalarType dtype) {
  ModelContext context = tiny_model_context();
  context.device = kCuda;
  context.dtype = dtype;
  return context;
}

std::shared_ptr<MambaModel> build_on_gpu(c10::ScalarType dtype) { return build(tiny_yaml(true), gpu_context(dtype)); }

// The logits of ids [rows, 10] through fresh caches: 4 prompt tokens, then one at a time.
at::Tensor stepped_logits(MambaModel& model, const at::Tensor& ids, bool graphed) {
  auto caches = make_caches(model, ids.size(0), ids.size(1));
  std::vector<at::Tensor> pieces{cached_logits(model, pointers(caches), ids.narrow(1, 0, 4))};
  for (int64_t t = 4; t < ids.size(1); ++t) {
    triax::StageInput input;
    input.input_ids = ids.narrow(1, t, 1);
    input.cuda_graph = graphed;
    pieces.push_back(model.forward_cached(pointers(caches), input).logits);
  }
  return at::cat(pieces, 1);
}

double relative_difference(const at::Tensor& got, const at::Tensor& want) {
  return max_abs_diff(got.to(at::kFloat), want.to(at::kFloat)) / want.abs().max().item<double>();
}

TEST(MambaCacheCuda, DecodingStepsFollowTheFullForward) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  for (c10::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    auto model = build_on_gpu(dtype);
    const at::Tensor ids = random_tokens(3, 10, 51).to(kCuda);
    const double tolerance = dtype == at::kFloat ? 1e-4 : 5e-2;
    EXPECT_LT(relative_difference(stepped_logits(*model, ids, false), full_logits(*model, ids)), tolerance)
        << c10::toString(dtype);
  }
}

TEST(MambaCacheCuda, GraphedStepsEqualTheUngraphedOnes) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  auto model = build_on_gpu(at::kBFloat16);
  const at::Tensor ids = random_tokens(2, 10, 61).to(kCuda);
  const at::Tensor plain = stepped_logits(*model, ids, false);
  EXPECT_TRUE(at::equal(stepped_logits(*model, ids, true), plain));
}

// TRIAX_MAMBA_ADD_NORM and TRIAX_MAMBA_DT_IN_STEP (the default): the steps' logits, plain and as
// a CUDA graph, follow those of the model built with both off (fp32 within 1e-5 with the same
// greedy tokens, bf16 within 2e-2: dt_proj's product is summed in another order).
TEST(MambaCacheCuda, FusedStepsFollowTheUnfusedOnes) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  for (c10::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    auto fused = build_on_gpu(dtype);
    auto unfused = build_unfused(tiny_yaml(true), gpu_context(dtype));
    const at::Tensor ids = random_tokens(3, 10, 71).to(kCuda);
    const at::Tensor want = stepped_logits(*unfused, ids, false);
    for (bool graphed : {false, true}) {
      const at::Tensor got = stepped_logits(*fused, ids, graphed);
      EXPECT_LT(relative_difference(got, want), dtype == at::kFloat ? 1e-5 : 2e-2) << "graphed " << graphed;
      if (dtype == at::kFloat) {
        EXPECT_TRUE(at::equal(got.argmax(-1), want.argmax(-1))) << "graphed " << graphed;
      }
    }
  }
}

}  // namespace
