// The CUDA cross-entropy against the CPU backend: loss and log-sum-exp per row for each dtype and
// wide vocabularies, partial vocab shards, and the backward, in place over the logits too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda_harness.hpp"

namespace megatron::test_support {
namespace cross_entropy_test {

using tensor::VocabShard;

constexpr DType kFloatTypes[] = {DType::F32, DType::Bf16, DType::F16};

// Loss and lse are f32 from the same inputs on both sides; exponentials within 2 ulp of expf
// (the CPU's polynomial, CUDA's expf) summed in another order: f32 rounding of the largest.
constexpr double kLoss = tolerance_for(DType::F32);

std::vector<int32_t> random_targets(size_t n, int32_t low, int32_t high, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> pick(low, high - 1);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = pick(rng);
  return t;
}

class CudaCrossEntropyTest : public CudaOpTest {
 protected:
  struct Forward {
    Pair loss, lse;
  };
  Forward forward(const Pair& logits, const Pair& targets, VocabShard shard = {}) {
    const int64_t n = targets.cpu.numel();
    Forward out{empty({n}, DType::F32), empty({n}, DType::F32)};
    cpu().cross_entropy_forward(logits.cpu, targets.cpu, out.loss.cpu, out.lse.cpu, shard);
    gpu().cross_entropy_forward(logits.gpu, targets.gpu, out.loss.gpu, out.lse.gpu, shard);
    return out;
  }

  void check_forward(int64_t n, int64_t v, DType dtype, uint32_t seed) {
    const Pair logits = random({n, v}, dtype, seed, 3.0f);
    const Pair targets = make_ints(random_targets(size_t(n), 0, int32_t(v), seed + 1), {n});
    const Forward f = forward(logits, targets);
    expect_close(f.loss, kLoss, 0.0, "loss");
    expect_close(f.lse, kLoss, 0.0, "lse");
  }

  // The CPU's lse of the logits on both backends, for a backward.
  Pair cpu_lse(const Pair& logits, const Pair& targets) {
    const int64_t n = targets.cpu.numel();
    Tensor loss = cpu().empty({n}, DType::F32), lse = cpu().empty({n}, DType::F32);
    cpu().cross_entropy_forward(logits.cpu, targets.cpu, loss, lse);
    return make(tensor::to_floats(cpu(), lse), {n});
  }
};

// --- forward ----------------------------------------------------------------------------------

// 1001 columns: rows of 16-bit logits start at every alignment.
TEST_F(CudaCrossEntropyTest, ForwardMatchesTheCpuForEachDtype) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(std::string(tensor::name(dtype)));
    check_forward(37, 1001, dtype, 1);
  }
}

TEST_F(CudaCrossEntropyTest, ForwardOfWideVocabulariesMatchesTheCpu) {
  check_forward(6, 50257, DType::Bf16, 3);
  check_forward(4, 32000, DType::F32, 5);
}

TEST_F(CudaCrossEntropyTest, ForwardOfTinyRowsMatchesTheCpu) {
  check_forward(9, 1, DType::F32, 7);
  check_forward(9, 3, DType::F16, 9);
}

// Columns [300, 800) of a vocabulary of 1200: targets elsewhere give loss = the shard's lse.
TEST_F(CudaCrossEntropyTest, ForwardOfAPartialShardTakesOnlyItsOwnTargets) {
  const int64_t n = 40, v = 500;
  const Pair logits = random({n, v}, DType::Bf16, 11, 3.0f);
  std::vector<int32_t> t = random_targets(size_t(n), 0, 1200, 12);
  for (size_t i = 0; i < t.size(); i += 3) t[i] = int32_t(300 + (i * 37) % v);  // some inside
  const Forward f = forward(logits, make_ints(t, {n}), {.first = 300, .partial = true});
  expect_close(f.loss, kLoss, 0.0, "loss");
  expect_close(f.lse, kLoss, 0.0, "lse");
}

// Where the CPU throws, the GPU cannot read the targets without waiting: the loss is NaN.
TEST_F(CudaCrossEntropyTest, ForwardGivesNaNForATargetOutsideTheVocabulary) {
  const Pair logits = random({3, 10}, DType::F32, 13);
  const Pair targets = make_ints({1, 10, 2}, {3});
  Pair loss = empty({3}, DType::F32), lse = empty({3}, DType::F32);
  gpu().cross_entropy_forward(logits.gpu, targets.gpu, loss.gpu, lse.gpu, {});
  const std::vector<float> got = tensor::to_floats(gpu(), loss.gpu);
  EXPECT_FALSE(std::isnan(got[0]));
  EXPECT_TRUE(std::isnan(got[1]));
  EXPECT_FALSE(std::isnan(got[2]));
}

TEST_F(CudaCrossEntropyTest, RejectsTargetsThatAreNotI32) {
  const Pair logits = random({3, 10}, DType::F32, 14), targets = random({3}, DType::F32, 15);
  Pair loss = empty({3}, DType::F32), lse = empty({3}, DType::F32);
  EXPECT_THROW(gpu().cross_entropy_forward(logits.gpu, targets.gpu, loss.gpu, lse.gpu, {}),
               std::logic_error);
}

TEST_F(CudaCrossEntropyTest, RejectsLogitsThatAreNotOneRowPerTarget) {
  const Pair logits = random({3, 10}, DType::F32, 16), targets = make_ints({1, 2, 3, 4}, {4});
  Pair loss = empty({4}, DType::F32), lse = empty({4}, DType::F32);
  EXPECT_THROW(gpu().cross_entropy_forward(logits.gpu, targets.gpu, loss.gpu, lse.gpu, {}),
               std::logic_error);
}

// --- backward ---------------------------------------------------------------------------------

TEST_F(CudaCrossEntropyTest, BackwardMatchesTheCpuForEachDtype) {
  const int64_t n = 37, v = 1001;
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(std::string(tensor::name(dtype)));
    const Pair logits = random({n, v}, dtype, 17, 3.0f);
    const Pair targets = make_ints(random_targets(size_t(n), 0, int32_t(v), 18), {n});
    const Pair lse = cpu_lse(logits, targets), dloss = random({n}, DType::F32, 19);
    Pair dlogits = empty({n, v}, dtype);
    cpu().cross_entropy_backward(logits.cpu, targets.cpu, lse.cpu, dloss.cpu, dlogits.cpu, {});
    gpu().cross_entropy_backward(logits.gpu, targets.gpu, lse.gpu, dloss.gpu, dlogits.gpu, {});
    expect_close(dlogits, tolerance_for(dtype), 0.0, "dlogits");
  }
}

TEST_F(CudaCrossEntropyTest, BackwardInPlaceOverwritesTheLogits) {
  const int64_t n = 21, v = 50257;
  for (DType dtype : {DType::F32, DType::Bf16}) {
    SCOPED_TRACE(std::string(tensor::name(dtype)));
    Pair logits = random({n, v}, dtype, 20, 3.0f);
    const Pair targets = make_ints(random_targets(size_t(n), 0, int32_t(v), 21), {n});
    const Pair lse = cpu_lse(logits, targets), dloss = random({n}, DType::Bf16, 22);
    cpu().cross_entropy_backward(logits.cpu, targets.cpu, lse.cpu, dloss.cpu, logits.cpu, {});
    gpu().cross_entropy_backward(logits.gpu, targets.gpu, lse.gpu, dloss.gpu, logits.gpu, {});
    expect_close(logits, tolerance_for(dtype), 0.0, "dlogits");
  }
}

// The shard [300, 800) of a vocabulary of 1500, with the whole vocabulary's lse; a target
// elsewhere has no one-hot here.
TEST_F(CudaCrossEntropyTest, BackwardOfAPartialShardUsesTheGlobalLse) {
  const int64_t n = 30, vocab = 1500, first = 300, v = 500;
  const std::vector<float> all = random_floats(size_t(n * vocab), 23, 3.0f);
  std::vector<int32_t> t = random_targets(size_t(n), 0, int32_t(vocab), 24);
  for (size_t i = 0; i < t.size(); i += 2) t[i] = int32_t(first + (i * 53) % v);
  const Pair targets = make_ints(t, {n});
  const Pair lse = cpu_lse(make(all, {n, vocab}), targets);
  std::vector<float> columns;
  for (int64_t i = 0; i < n; ++i) {
    columns.insert(columns.end(), all.begin() + i * vocab + first, all.begin() + i * vocab + first + v);
  }
  const Pair logits = make(columns, {n, v}, DType::F32), dloss = random({n}, DType::F32, 25);
  Pair dlogits = empty({n, v}, DType::F32);
  const VocabShard shard{.first = first, .partial = true};
  cpu().cross_entropy_backward(logits.cpu, targets.cpu, lse.cpu, dloss.cpu, dlogits.cpu, shard);
  gpu().cross_entropy_backward(logits.gpu, targets.gpu, lse.gpu, dloss.gpu, dlogits.gpu, shard);
  expect_close(dlogits, tolerance_for(DType::F32), 0.0, "dlogits");
}

TEST_F(CudaCrossEntropyTest, BackwardRejectsDlogitsOfAnotherSize) {
  const Pair logits = random({3, 10}, DType::F32, 26), targets = make_ints({1, 2, 3}, {3});
  const Pair lse = random({3}, DType::F32, 27), dloss = random({3}, DType::F32, 28);
  Pair dlogits = empty({3, 11}, DType::F32);
  EXPECT_THROW(gpu().cross_entropy_backward(logits.gpu, targets.gpu, lse.gpu, dloss.gpu,
                                            dlogits.gpu, {}),
               std::logic_error);
}

}  // namespace cross_entropy_test
}  // namespace megatron::test_support
