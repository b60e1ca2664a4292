// CpuBackend embeddings: the forward gathers table rows (zeros for another shard's ids), the
// backward scatter-adds gradients into the rows, deterministically.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tensor/cpu_backend.hpp"
#include "tensor/gradcheck.hpp"
#include "tensor/host_io.hpp"

namespace megatron::tensor {
namespace cpu_embedding_test {

using test_support::expect_gradient_near;
using test_support::numeric_gradient;
using test_support::random_values;

// A table of `rows` x 3 whose element (r, c) is 10 r + c: every row is recognisable.
std::vector<float> numbered_table(int64_t rows) {
  std::vector<float> t;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < 3; ++c) t.push_back(float(10 * r + c));
  return t;
}

std::vector<float> lookup(CpuBackend& backend, const std::vector<int32_t>& ids,
                          const std::vector<float>& table, int64_t hidden, int64_t row_offset,
                          DType table_dtype = DType::F32) {
  const Tensor id = from_ints(backend, ids, {static_cast<int64_t>(ids.size())});
  const Tensor t = from_floats(backend, table,
                               {static_cast<int64_t>(table.size()) / hidden, hidden}, table_dtype);
  Tensor out = backend.empty({static_cast<int64_t>(ids.size()), hidden}, DType::F32);
  backend.embedding_forward(id, t, out, row_offset, false);
  return to_floats(backend, out);
}

// dtable after adding dout's rows to `initial`.
std::vector<float> scatter(CpuBackend& backend, const std::vector<int32_t>& ids,
                           const std::vector<float>& dout, std::vector<float> initial,
                           int64_t hidden, int64_t row_offset) {
  const Tensor id = from_ints(backend, ids, {static_cast<int64_t>(ids.size())});
  const Tensor g = from_floats(backend, dout, {static_cast<int64_t>(ids.size()), hidden});
  Tensor dtable =
      from_floats(backend, initial, {static_cast<int64_t>(initial.size()) / hidden, hidden});
  backend.embedding_backward(id, g, dtable, row_offset);
  return to_floats(backend, dtable);
}

TEST(CpuEmbedding, ForwardGathersTheRowOfEachId) {
  CpuBackend backend(2);
  EXPECT_EQ(lookup(backend, {2, 0, 2}, numbered_table(3), 3, 0),
            (std::vector<float>{20, 21, 22, 0, 1, 2, 20, 21, 22}));
}

TEST(CpuEmbedding, IdsOutsideTheShardGiveZeros) {
  // This shard holds rows 10..12 of the vocabulary.
  CpuBackend backend(2);
  EXPECT_EQ(lookup(backend, {9, 10, 12, 13}, numbered_table(3), 3, 10),
            (std::vector<float>{0, 0, 0, 0, 1, 2, 20, 21, 22, 0, 0, 0}));
}

TEST(CpuEmbedding, AccumulateAddsRowsToTheOutput) {
  CpuBackend backend(2);
  const Tensor ids = from_ints(backend, std::vector<int32_t>{1, 7}, {2});
  const Tensor table = from_floats(backend, numbered_table(2), {2, 3});
  Tensor out = from_floats(backend, std::vector<float>{100, 100, 100, 5, 5, 5}, {2, 3});
  backend.embedding_forward(ids, table, out, 0, true);
  // id 7 is outside the table: its row keeps what it held.
  EXPECT_EQ(to_floats(backend, out), (std::vector<float>{110, 111, 112, 5, 5, 5}));
}

TEST(CpuEmbedding, ForwardReadsBf16Tables) {
  CpuBackend backend(2);
  // Integers below 256 are exact in bf16.
  EXPECT_EQ(lookup(backend, {1, 0}, numbered_table(2), 3, 0, DType::Bf16),
            (std::vector<float>{10, 11, 12, 0, 1, 2}));
}

TEST(CpuEmbedding, BackwardAddsEachTokensGradientToItsRow) {
  CpuBackend backend(2);
  const std::vector<float> dout{1, 2, 3, 10, 20, 30, 100, 200, 300};
  EXPECT_EQ(scatter(backend, {1, 0, 1}, dout, std::vector<float>(6, 0.0f), 3, 0),
            (std::vector<float>{10, 20, 30, 101, 202, 303}));
}

TEST(CpuEmbedding, BackwardAccumulatesIntoTheGradient) {
  CpuBackend backend(2);
  EXPECT_EQ(scatter(backend, {0}, {1, 2, 3}, {5, 5, 5, 7, 7, 7}, 3, 0),
            (std::vector<float>{6, 7, 8, 7, 7, 7}));
}

TEST(CpuEmbedding, BackwardSkipsIdsOutsideTheShard) {
  CpuBackend backend(2);
  const std::vector<float> dout{1, 1, 1, 2, 2, 2, 4, 4, 4};
  EXPECT_EQ(scatter(backend, {4, 5, 7}, dout, std::vector<float>(6, 0.0f), 3, 5),
            (std::vector<float>{2, 2, 2, 0, 0, 0}));
}

TEST(CpuEmbedding, BackwardMatchesNumericGradient) {
  CpuBackend backend(2);
  const int64_t hidden = 5;
  const std::vector<int32_t> ids{3, 1, 3, 0, 8, 3, 2};  // repeats, and one id outside
  const auto table = random_values(4 * hidden, 1);
  const auto weights = random_values(ids.size() * hidden, 2);
  const auto numeric = numeric_gradient(
      table, [&](const std::vector<float>& t) { return lookup(backend, ids, t, hidden, 0); },
      weights);
  // The forward is linear in the table: central differences are exact up to f32 rounding.
  expect_gradient_near(
      scatter(backend, ids, weights, std::vector<float>(table.size(), 0.0f), hidden, 0), numeric,
      1e-3, 1e-5, "dtable");
}

TEST(CpuEmbedding, BackwardIsBitwiseTheSameOnOneAndTwoThreads) {
  // Many tokens share few rows, and the hidden size spans several column blocks: any
  // thread-dependent order of the additions would change the rounding.
  CpuBackend one(1), two(2);
  const int64_t hidden = 300, rows = 7, tokens = 2000;
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < tokens; ++i) ids.push_back(static_cast<int32_t>((i * 5 + i / 3) % rows));
  const auto dout = random_values(static_cast<size_t>(tokens * hidden), 3);
  const std::vector<float> zero(static_cast<size_t>(rows * hidden), 0.0f);
  const auto a = scatter(one, ids, dout, zero, hidden, 0);
  const auto b = scatter(two, ids, dout, zero, hidden, 0);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

}  // namespace cpu_embedding_test
}  // namespace megatron::tensor
