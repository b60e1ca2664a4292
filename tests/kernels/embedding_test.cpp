// The CUDA embedding gather and its deterministic scatter-add backward against the CPU backend:
// each dtype, ids outside a vocab shard, many tokens of one row, the same bits every run.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda_harness.hpp"

namespace megatron::test_support {
namespace embedding_test {

constexpr DType kFloatTypes[] = {DType::F32, DType::Bf16, DType::F16};

// ids uniform in [low, high).
std::vector<int32_t> random_ids(size_t n, int32_t low, int32_t high, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> pick(low, high - 1);
  std::vector<int32_t> ids(n);
  for (int32_t& id : ids) id = pick(rng);
  return ids;
}

class CudaEmbeddingTest : public CudaOpTest {
 protected:
  // The forward on both backends into `out` (which may hold values, for accumulate).
  void forward(const std::vector<int32_t>& ids, const Pair& table, Pair& out, int64_t row_offset,
               bool accumulate) {
    const Pair id = make_ints(ids, {int64_t(ids.size())});
    cpu().embedding_forward(id.cpu, table.cpu, out.cpu, row_offset, accumulate);
    gpu().embedding_forward(id.gpu, table.gpu, out.gpu, row_offset, accumulate);
  }

  // The backward on both backends into a dtable [rows, hidden] starting from non-zero values.
  Pair backward(const std::vector<int32_t>& ids, int64_t rows, int64_t hidden, DType dout_dtype,
                int64_t row_offset) {
    const auto n = int64_t(ids.size());
    const Pair id = make_ints(ids, {n}), dout = random({n, hidden}, dout_dtype, 31);
    Pair dtable = random({rows, hidden}, DType::F32, 32);
    cpu().embedding_backward(id.cpu, dout.cpu, dtable.cpu, row_offset);
    gpu().embedding_backward(id.gpu, dout.gpu, dtable.gpu, row_offset);
    return dtable;
  }
};

// --- forward: every result is one f32 addition (base 0 unless accumulating) rounded to out's
// dtype, as on the CPU, so the two agree bit for bit. ------------------------------------------

TEST_F(CudaEmbeddingTest, ForwardGathersTableRowsForEachDtype) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(std::string(tensor::name(dtype)));
    const Pair table = random({50, 771}, dtype, 1);
    Pair out = empty({37, 771}, dtype);
    forward(random_ids(37, 0, 50, 2), table, out, 0, false);
    expect_equal(out);
  }
}

TEST_F(CudaEmbeddingTest, ForwardOfAlignedRowsGathersTableRows) {
  const Pair table = random({300, 1024}, DType::Bf16, 3);
  Pair out = empty({100, 1024}, DType::Bf16);
  forward(random_ids(100, 0, 300, 4), table, out, 0, false);
  expect_equal(out);
}

TEST_F(CudaEmbeddingTest, ForwardWritesZerosForIdsOutsideTheShard) {
  const Pair table = random({50, 771}, DType::F32, 5);
  Pair out = random({80, 771}, DType::F32, 6);  // overwritten, zeros included
  forward(random_ids(80, 0, 200, 7), table, out, 100, false);
  expect_equal(out);
}

TEST_F(CudaEmbeddingTest, ForwardAccumulatesOntoOutAndLeavesOtherShardsRowsAlone) {
  for (DType dtype : {DType::F32, DType::Bf16}) {
    SCOPED_TRACE(std::string(tensor::name(dtype)));
    const Pair table = random({50, 771}, DType::F32, 8);
    Pair out = random({80, 771}, dtype, 9);
    forward(random_ids(80, 0, 200, 10), table, out, 100, true);
    expect_equal(out);
  }
}

TEST_F(CudaEmbeddingTest, ForwardRoundsTheTableToTheOutputDtype) {
  for (DType dtype : {DType::Bf16, DType::F16}) {
    SCOPED_TRACE(std::string(tensor::name(dtype)));
    const Pair table = random({40, 333}, DType::F32, 11);
    Pair out = empty({64, 333}, dtype);
    forward(random_ids(64, 0, 40, 12), table, out, 0, false);
    expect_equal(out);
  }
}

// --- backward: tokens of a row add up in token order, as on the CPU, except that a row with
// tokens on both sides of a multiple of 256 sorted positions adds its pieces' sums instead: f32
// rounding of the largest value apart. ------------------------------------------------------------

constexpr double kSums = tolerance_for(DType::F32);

TEST_F(CudaEmbeddingTest, BackwardAccumulatesRepeatedIdsForEachDoutDtype) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(std::string(tensor::name(dtype)));
    // 600 tokens over 60 rows: about ten each, across three chunks of sorted positions.
    expect_close(backward(random_ids(600, 0, 60, 13), 60, 771, dtype, 0), kSums, 0.0, "dtable");
  }
}

TEST_F(CudaEmbeddingTest, BackwardOfAlignedRowsMatchesTheCpu) {
  expect_close(backward(random_ids(700, 0, 500, 14), 500, 1024, DType::Bf16, 0), kSums, 0.0,
               "dtable");
}

// 1500 of 2000 tokens on one row (padding, say): a run over six chunks, summed piece by piece.
TEST_F(CudaEmbeddingTest, BackwardSumsThousandsOfTokensOfOneRow) {
  std::vector<int32_t> ids = random_ids(2000, 0, 90, 15);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i % 4 != 1) ids[i] = 7;
  }
  expect_close(backward(ids, 90, 300, DType::F32, 0), kSums, 0.0, "dtable");
}

TEST_F(CudaEmbeddingTest, BackwardIgnoresIdsOutsideTheShard) {
  // Rows [40, 70) of a vocabulary of 100: most ids belong to other shards.
  expect_close(backward(random_ids(500, 0, 100, 16), 30, 257, DType::Bf16, 40), kSums, 0.0,
               "dtable");
}

TEST_F(CudaEmbeddingTest, BackwardWithEveryIdOutsideTheShardLeavesTheTable) {
  expect_close(backward(random_ids(300, 50, 100, 17), 30, 64, DType::F32, 0), 0.0, 0.0, "dtable");
}

TEST_F(CudaEmbeddingTest, BackwardGivesTheSameBitsEveryRun) {
  const int64_t n = 3000, rows = 200, hidden = 515;
  std::vector<int32_t> ids = random_ids(size_t(n), 0, 250, 18);
  for (size_t i = 0; i < ids.size(); i += 3) ids[i] = 11;
  const Pair id = make_ints(ids, {n}), dout = random({n, hidden}, DType::Bf16, 19);
  const std::vector<float> start = random_floats(size_t(rows * hidden), 20);
  std::vector<float> first;
  for (int run = 0; run < 2; ++run) {
    Tensor dtable = tensor::from_floats(gpu(), start, {rows, hidden});
    gpu().embedding_backward(id.gpu, dout.gpu, dtable, 0);
    if (run == 0) {
      first = tensor::to_floats(gpu(), dtable);
    } else {
      EXPECT_EQ(tensor::to_floats(gpu(), dtable), first);
    }
  }
}

TEST_F(CudaEmbeddingTest, RejectsIdsThatAreNotI32) {
  const Pair ids = random({8}, DType::F32, 21), table = random({10, 4}, DType::F32, 22);
  Pair out = empty({8, 4}, DType::F32);
  EXPECT_THROW(gpu().embedding_forward(ids.gpu, table.gpu, out.gpu, 0, false), std::logic_error);
}

TEST_F(CudaEmbeddingTest, BackwardRejectsATableGradientThatIsNotF32) {
  const Pair ids = make_ints(random_ids(8, 0, 10, 23), {8}), dout = random({8, 4}, DType::F32, 24);
  Pair dtable = zeros({10, 4}, DType::Bf16);
  EXPECT_THROW(gpu().embedding_backward(ids.gpu, dout.gpu, dtable.gpu, 0), std::logic_error);
}

}  // namespace embedding_test
}  // namespace megatron::test_support
