// The logged values read one step late (triax/core/step/step_read_back.hpp): what is handed over is what
// was queued, for the step it was queued for, also when the values are still being computed on
// the GPU when they are queued.
#include "triax/core/step/step_read_back.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "triax/error.hpp"

namespace triax {
namespace {

TEST(StepReadBack, HandsOverTheValuesOfTheQueuedStep) {
  StepReadBack read_back(c10::Device(c10::kCPU));
  EXPECT_FALSE(read_back.pending());
  at::Tensor values = at::tensor({2.5f, 0.75f});
  const auto before = DeviceMark::Clock::now();
  read_back.queue(7, values);
  const auto queued = DeviceMark::Clock::now();
  values.fill_(-1.0f);  // the caller's tensor is free again once queued
  ASSERT_TRUE(read_back.pending());
  EXPECT_EQ(read_back.pending_step(), 7);
  StepReadBack::Values taken = read_back.take();
  EXPECT_FALSE(read_back.pending());
  EXPECT_EQ(taken.step, 7);
  EXPECT_TRUE(at::equal(taken.host, at::tensor({2.5f, 0.75f}))) << taken.host;
  // The step ended when its values were queued (CPU work is done by then), not when they were read.
  EXPECT_GE(taken.done.queued_at(), before);
  EXPECT_LE(taken.done.queued_at(), queued);
}

TEST(StepReadBack, RefusesASecondStepBeforeTheFirstIsRead) {
  StepReadBack read_back(c10::Device(c10::kCPU));
  EXPECT_THROW(read_back.take(), Error);
  read_back.queue(3, at::ones({2}));
  try {
    read_back.queue(4, at::ones({2}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("step 4: the values of step 3 were queued and never read"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(read_back.take().step, 3);
}

// Queued behind a long chain of products, the values are not there yet: take() must wait for
// them (reading the pinned buffer at once would hand over whatever it held before).
TEST(StepReadBackCuda, WaitsForValuesStillBeingComputed) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no GPU";
  const c10::Device gpu(c10::kCUDA, 0);
  at::Tensor x = at::eye(2048, at::TensorOptions().device(gpu)) * 1.001;
  at::Tensor y = at::full({2048, 2048}, 1.0f, x.options());
  for (int round = 0; round < 3; ++round) {
    (void)y[0][0].item<float>();  // an idle GPU at the start of each round
    for (int i = 0; i < 400; ++i) y = at::mm(x, y);  // each column of y grows by 1.001 per product
    at::Tensor values = at::stack({y[0][0], y.sum() / (2048.0 * 2048.0)});
    StepReadBack read_back(gpu);
    read_back.queue(round, values);
    const at::Tensor expected = values.cpu();  // after the queue: waits for the whole stream
    StepReadBack::Values taken = read_back.take();
    EXPECT_EQ(taken.step, round);
    EXPECT_TRUE(at::equal(taken.host, expected)) << taken.host << " vs " << expected;
    EXPECT_GT(taken.host[0].item<float>(), 1.4f);  // 1.001^400 = 1.49
  }
}
}  // namespace
}  // namespace triax
