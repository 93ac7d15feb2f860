// rotary_qkv_into_cache (rotary_qkv.hpp), a decoding step's q, k and v with k and v written into
// the cache at each row's position. RotaryIntoCacheCpu checks the composition against rotary_qkv
// run row by row on the table rows of that row's position; RotaryIntoCacheCuda (ctest label gpu,
// skipped without a GPU) checks the CUDA kernels, which read the positions on the device, against
// the unfused LibTorch path they replace (gathered table rows, rotary_qkv, scatter_): bit for bit,
// since both round the same float products once. RotaryIntoCacheCuda.OneLaunch* checks q, k and v
// in one launch (the default, kernels::rotary_walks) against three (TRIAX_ROTARY_ONE_LAUNCH=0).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "scoped_variable.hpp"
#include "triax/error.hpp"
#include "triax/layers/rotary_qkv.hpp"

namespace {

struct Case {
  int64_t rows, fresh, kv_heads, group, head_dim, table, capacity;
};

// Grouped-query shapes: 135m (3 groups of 3), 1.7b (one query head per key head), a padded step.
const Case kCases[] = {{1, 1, 3, 3, 64, 40, 24}, {3, 1, 32, 1, 64, 40, 24}, {2, 2, 2, 4, 8, 6, 8}};

at::Tensor seeded(const std::vector<int64_t>& shape, uint64_t seed, c10::ScalarType dtype, c10::Device device) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn(shape, generator, at::TensorOptions().dtype(at::kDouble)).to(device, dtype);
}

struct Inputs {
  at::Tensor qkv, cos, sin, positions, keys, values;
};

// Rows at different positions; the last row's at the end of the cache (past the tables where the
// case's tables are shorter: they read the last table row).
Inputs inputs_of(const Case& c, c10::ScalarType dtype, c10::Device device) {
  Inputs in;
  in.qkv = seeded({c.rows, c.fresh, c.kv_heads, c.group + 2, c.head_dim}, 1, dtype, device);
  in.cos = seeded({c.table, c.head_dim}, 2, dtype, device);
  in.sin = seeded({c.table, c.head_dim}, 3, dtype, device);
  std::vector<int64_t> at;
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t j = 0; j < c.fresh; ++j) at.push_back(r + 1 == c.rows ? c.capacity - c.fresh + j : 5 * r + j);
  in.positions = at::tensor(at, at::TensorOptions().dtype(at::kLong)).view({c.rows, c.fresh}).to(device);
  in.keys = seeded({c.rows, c.kv_heads, c.capacity, c.head_dim}, 4, dtype, device);
  in.values = seeded({c.rows, c.kv_heads, c.capacity, c.head_dim}, 5, dtype, device);
  return in;
}

std::string label(const Case& c, c10::ScalarType dtype) {
  return std::string(c10::toString(dtype)) + " rows " + std::to_string(c.rows) + " new " + std::to_string(c.fresh) +
         " kv_heads " + std::to_string(c.kv_heads) + " group " + std::to_string(c.group);
}

void expect_equal(const at::Tensor& actual, const at::Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  EXPECT_TRUE(at::equal(actual.cpu(), expected.cpu())) << what << ": max difference "
                                                       << (actual.cpu().to(at::kDouble) - expected.cpu().to(at::kDouble))
                                                              .abs()
                                                              .max()
                                                              .item<double>();
}

TEST(RotaryIntoCacheCpu, EachRowAtItsPositionAndNothingElseWritten) {
  for (const Case& c : kCases) {
    Inputs in = inputs_of(c, at::kFloat, at::kCPU);
    const at::Tensor keys_before = in.keys.clone(), values_before = in.values.clone();
    const at::Tensor q = triax::rotary_qkv_into_cache(in.qkv, in.cos, in.sin, in.positions, in.keys, in.values);
    ASSERT_EQ(q.sizes(), (std::vector<int64_t>{c.rows, c.kv_heads * c.group, c.fresh, c.head_dim}));
    at::Tensor written = at::zeros({c.rows, c.capacity}, at::kBool);
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t j = 0; j < c.fresh; ++j) {
        const int64_t p = in.positions[r][j].item<int64_t>(), row = std::min(p, c.table - 1);
        const auto [eq, ek, ev] = triax::rotary_qkv(in.qkv.narrow(0, r, 1).narrow(1, j, 1),
                                                    in.cos.narrow(0, row, 1), in.sin.narrow(0, row, 1));
        const std::string what = label(c, at::kFloat) + " row " + std::to_string(r) + " token " + std::to_string(j);
        EXPECT_TRUE(at::allclose(q[r].select(1, j), eq[0].select(1, 0))) << what << ": q";
        EXPECT_TRUE(at::allclose(in.keys[r].select(1, p), ek[0].select(1, 0))) << what << ": k";
        EXPECT_TRUE(at::equal(in.values[r].select(1, p), ev[0].select(1, 0))) << what << ": v";
        written[r][p] = true;
      }
    const at::Tensor kept = written.logical_not().view({c.rows, 1, c.capacity, 1}).expand_as(in.keys);
    EXPECT_TRUE(at::equal(in.keys.masked_select(kept), keys_before.masked_select(kept))) << label(c, at::kFloat);
    EXPECT_TRUE(at::equal(in.values.masked_select(kept), values_before.masked_select(kept))) << label(c, at::kFloat);
  }
}

TEST(RotaryIntoCacheCpu, RefusesPositionsOfAnotherShape) {
  Inputs in = inputs_of(kCases[0], at::kFloat, at::kCPU);
  EXPECT_THROW(triax::rotary_qkv_into_cache(in.qkv, in.cos, in.sin, in.positions.view({-1}), in.keys, in.values),
               triax::Error);
}

// Today's unfused path of a decoding step (GroupedQueryAttention before the fused one): the
// tables' rows gathered, rotary_qkv over the rows side by side, scatter_ into the cache.
at::Tensor unfused(Inputs& in) {
  const int64_t rows = in.qkv.size(0), fresh = in.qkv.size(1), head_dim = in.qkv.size(4);
  const at::Tensor side_by_side = in.qkv.reshape({1, rows * fresh, in.qkv.size(2), in.qkv.size(3), head_dim});
  const at::Tensor table_rows = in.positions.reshape({-1}).clamp_max(in.cos.size(0) - 1);
  const auto [q, k, v] =
      triax::rotary_qkv(side_by_side, in.cos.index_select(0, table_rows), in.sin.index_select(0, table_rows));
  auto by_row = [&](const at::Tensor& t) {
    return t.transpose(1, 2).reshape({rows, fresh, t.size(1), head_dim}).transpose(1, 2);
  };
  const at::Tensor at = in.positions.view({rows, 1, fresh, 1}).expand({rows, in.keys.size(1), fresh, head_dim});
  in.keys.scatter_(2, at, by_row(k));
  in.values.scatter_(2, at, by_row(v));
  return by_row(q);
}

TEST(RotaryIntoCacheCuda, KernelsEqualTheUnfusedPath) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  for (const c10::ScalarType dtype : {at::kBFloat16, at::kFloat})
    for (const Case& c : kCases) {
      Inputs fused = inputs_of(c, dtype, at::kCUDA), reference = inputs_of(c, dtype, at::kCUDA);
      const at::Tensor q = triax::rotary_qkv_into_cache(fused.qkv, fused.cos, fused.sin, fused.positions, fused.keys,
                                                        fused.values);
      const at::Tensor expected_q = unfused(reference);
      expect_equal(q, expected_q, label(c, dtype) + ": q");
      expect_equal(fused.keys, reference.keys, label(c, dtype) + ": keys");
      expect_equal(fused.values, reference.values, label(c, dtype) + ": values");
    }
}

// Every case (16-byte vectors and single elements: bf16 at head_dim 8 has 4 pairs, half a vector)
// into the cache in one launch (the default) and in three (TRIAX_ROTARY_ONE_LAUNCH=0): the same bits.
TEST(RotaryIntoCacheCuda, OneLaunchEqualsThreeLaunches) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  for (const c10::ScalarType dtype : {at::kBFloat16, at::kFloat})
    for (const Case& c : kCases) {
      Inputs three = inputs_of(c, dtype, at::kCUDA), one = inputs_of(c, dtype, at::kCUDA);
      const std::string what = label(c, dtype) + ", one launch";
      at::Tensor q3;
      {
        ScopedVariable three_launches("TRIAX_ROTARY_ONE_LAUNCH", "0");
        q3 = triax::rotary_qkv_into_cache(three.qkv, three.cos, three.sin, three.positions, three.keys, three.values);
      }
      ScopedVariable one_launch("TRIAX_ROTARY_ONE_LAUNCH", nullptr);
      const at::Tensor q1 =
          triax::rotary_qkv_into_cache(one.qkv, one.cos, one.sin, one.positions, one.keys, one.values);
      expect_equal(q1, q3, what + ": q");
      expect_equal(one.keys, three.keys, what + ": keys");
      expect_equal(one.values, three.values, what + ": values");
    }
}

}  // namespace
