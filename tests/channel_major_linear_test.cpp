// RowParallelLinear::forward_channel_major, run by every rank of a tensor-parallel group as large
// as the world (1 or 2 ranks under mpirun): a channel-major input [b, in/tp, s] must give the
// output, the input gradient (channel-major and contiguous) and the weight and bias gradients of
// forward() on the same values laid out [b, s, in/tp], for both tp_modes, both weight layouts,
// fp32 and fp64, and a batch of one row as of several.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

#include "tensor_parallel_group.hpp"
#include "triax/layers/linear.hpp"

// A namespace of this file's own: the multi-rank test files compile together (tests/multi_rank.cmake)
// and share names such as kSeq or toy_vtable.
namespace channel_major_linear_test {
namespace {

using triax::TensorParallel;
using triax::TpMode;
using triax::testing::assign;
using triax::testing::leaf;
using triax::testing::seeded;
using triax::testing::shard_of;

constexpr int64_t kSeq = 8, kIn = 12, kOut = 10;

class ChannelMajorLinearTest : public ::testing::TestWithParam<TpMode> {
 protected:
  void SetUp() override {
    world_ = triax::testing::world_tensor_parallel(GetParam());  // owns the communicator tp_ uses
    tp_ = world_.tp;
  }
  triax::testing::WorldTensorParallel world_;
  TensorParallel tp_;
};

void expect_equal_values(const at::Tensor& actual, const at::Tensor& expected, const std::string& what) {
  triax::testing::expect_close(actual, expected, what, expected.scalar_type() == at::kDouble ? 1e-12 : 1e-5);
}

TEST_P(ChannelMajorLinearTest, MatchesTheSequenceMajorInput) {
  for (c10::ScalarType dtype : {at::kFloat, at::kDouble})
    for (bool input_major : {false, true})
      for (int64_t batch : {1, 3}) {
        const std::string where = std::string(GetParam() == TpMode::ReduceScatter ? "REDUCE_SCATTER " : "ALL_REDUCE ") +
                                  c10::toString(dtype) + (input_major ? " conv1d" : "") + " batch " +
                                  std::to_string(batch) + ": ";
        triax::LinearOptions options{kIn, kOut, true, c10::kCPU, dtype};
        if (input_major) options = options.conv1d();
        triax::RowParallelLinear layer(options, tp_);
        assign(layer.weight, shard_of(seeded(input_major ? std::vector<int64_t>{kIn, kOut} : std::vector<int64_t>{kOut, kIn},
                                             41, dtype),
                                      input_major ? 0 : 1, tp_));
        assign(layer.bias, seeded({kOut}, 42, dtype));
        const at::Tensor x = shard_of(seeded({batch, kIn, kSeq}, 43, dtype), 1, tp_);  // [b, in/tp, s]

        at::Tensor sequence_major = leaf(x.transpose(1, 2).contiguous());
        const at::Tensor expected = layer.forward(sequence_major);
        const at::Tensor g = seeded(expected.sizes().vec(), 44, dtype);
        (expected * g).sum().backward();
        const at::Tensor expected_weight = layer.weight.grad().clone(), expected_bias = layer.bias.grad().clone();
        layer.weight.mutable_grad() = at::Tensor();
        layer.bias.mutable_grad() = at::Tensor();

        at::Tensor channel_major = leaf(x);
        const at::Tensor y = layer.forward_channel_major(channel_major);
        (y * g).sum().backward();
        expect_equal_values(y, expected, where + "output");
        EXPECT_TRUE(channel_major.grad().is_contiguous()) << where << "the input gradient is strided";
        expect_equal_values(channel_major.grad(), sequence_major.grad().transpose(1, 2), where + "input gradient");
        expect_equal_values(layer.weight.grad(), expected_weight, where + "weight gradient");
        expect_equal_values(layer.bias.grad(), expected_bias, where + "bias gradient");
      }
}

INSTANTIATE_TEST_SUITE_P(Modes, ChannelMajorLinearTest, ::testing::Values(TpMode::AllReduce, TpMode::ReduceScatter),
                         [](const auto& info) {
                           return std::string(info.param == TpMode::ReduceScatter ? "ReduceScatter" : "AllReduce");
                         });

}  // namespace
}  // namespace channel_major_linear_test
