// The profiling backend forwards every op unchanged and, inside profiled steps only, records
// each call with its shapes, FLOPs, bytes and time.
#include "tensor/profiling_backend.hpp"

#include <gtest/gtest.h>

#include "tensor/cpu_backend.hpp"
#include "tensor/host_io.hpp"

namespace megatron::tensor {
namespace profiling_backend_test {

class ProfilingBackendTest : public ::testing::Test {
 protected:
  ProfilingBackend backend{std::make_unique<CpuBackend>(1)};
  Tensor filled(const Shape& shape, float value) {
    Tensor t = backend.empty(shape, DType::F32);
    backend.fill(t, value);
    return t;
  }
};

TEST_F(ProfilingBackendTest, ResultsAreThoseOfTheBackendItWraps) {
  CpuBackend plain(1);
  const std::vector<float> a_values{1, 2, 3, 4, 5, 6}, b_values{1, 0, -1, 2, 0.5f, 3};
  Tensor a = from_floats(backend, a_values, {2, 3}), b = from_floats(backend, b_values, {3, 2});
  Tensor c = backend.empty({2, 2}, DType::F32);
  backend.gemm(a, false, b, false, c, 1.0f, 0.0f);
  Tensor pa = from_floats(plain, a_values, {2, 3}), pb = from_floats(plain, b_values, {3, 2});
  Tensor pc = plain.empty({2, 2}, DType::F32);
  plain.gemm(pa, false, pb, false, pc, 1.0f, 0.0f);
  EXPECT_EQ(to_floats(backend, c), to_floats(plain, pc));
  EXPECT_EQ(backend.device(), Device::Cpu);
  EXPECT_EQ(&backend.underlying(), &backend.underlying().underlying());
  EXPECT_NE(&backend.underlying(), static_cast<Backend*>(&backend));
}

TEST_F(ProfilingBackendTest, RecordsOnlyTheOpsInsideProfiledSteps) {
  Tensor x = filled({4, 8}, 1.0f);
  backend.start();
  backend.scale(x, 2.0f);  // before the step: not recorded
  backend.begin_step(7);
  backend.scale(x, 2.0f);
  backend.add(x, x, x);
  backend.end_step();
  backend.scale(x, 2.0f);  // after it: not recorded
  const ProfileRecord record = backend.finish();
  ASSERT_EQ(record.steps.size(), 1u);
  EXPECT_EQ(record.steps[0].iteration, 7);
  ASSERT_EQ(record.calls.size(), 2u);
  EXPECT_EQ(record.calls[0].op, "scale");
  EXPECT_EQ(record.calls[1].op, "add");
  EXPECT_EQ(record.calls[1].shapes, "[4, 8] f32");
  EXPECT_FALSE(backend.started());
}

TEST_F(ProfilingBackendTest, CallsLieInsideTheirStepInOrder) {
  Tensor x = filled({256, 256}, 1.0f);
  backend.start();
  for (int step = 1; step <= 2; ++step) {
    backend.begin_step(step);
    for (int i = 0; i < 3; ++i) backend.scale(x, 1.5f);
    backend.end_step();
  }
  const ProfileRecord record = backend.finish();
  ASSERT_EQ(record.steps.size(), 2u);
  ASSERT_EQ(record.calls.size(), 6u);
  for (size_t i = 0; i < record.calls.size(); ++i) {
    const ProfiledStep& step = record.steps[i / 3];
    const ProfiledCall& call = record.calls[i];
    EXPECT_GE(call.ms, 0.0);
    EXPECT_GE(call.start_ms, step.start_ms);
    EXPECT_LE(call.start_ms + call.ms, step.start_ms + step.ms + 1e-9);
    if (i > 0) EXPECT_GE(call.start_ms, record.calls[i - 1].start_ms + record.calls[i - 1].ms);
  }
  EXPECT_GE(record.steps[1].start_ms, record.steps[0].start_ms + record.steps[0].ms);
}

TEST_F(ProfilingBackendTest, AGemmIsCreditedTwiceItsMultiplyAddsAndTheBytesItMoves) {
  Tensor a = filled({6, 4}, 1.0f), b = filled({5, 4}, 1.0f), c = filled({6, 5}, 0.0f);
  backend.start();
  backend.begin_step(1);
  backend.gemm(a, false, b, true, c, 1.0f, 1.0f);  // accumulates: c is read and written
  const ProfileRecord record = backend.finish();
  ASSERT_EQ(record.calls.size(), 1u);
  const ProfiledCall& call = record.calls[0];
  EXPECT_EQ(call.op, "gemm");
  EXPECT_EQ(call.shapes, "[6, 4] x [5, 4]^T -> [6, 5] f32");
  EXPECT_DOUBLE_EQ(call.flops, 2.0 * 6 * 5 * 4);
  EXPECT_DOUBLE_EQ(call.bytes, 4.0 * (24 + 20 + 30 + 30));
  EXPECT_EQ(call.allocated_bytes, backend.memory().allocated_bytes);
}

TEST_F(ProfilingBackendTest, ABatchedGemmCountsEveryMatrixOfTheBatch) {
  Tensor a = filled({3, 4, 2}, 1.0f), b = filled({3, 4, 5}, 1.0f), c = filled({3, 2, 5}, 0.0f);
  backend.start();
  backend.begin_step(1);
  backend.gemm_batched(a, true, b, false, c, 1.0f, 0.0f);
  const ProfileRecord record = backend.finish();
  ASSERT_EQ(record.calls.size(), 1u);
  EXPECT_DOUBLE_EQ(record.calls[0].flops, 3.0 * 2.0 * 2 * 5 * 4);
}

TEST_F(ProfilingBackendTest, CausalAttentionCountsHalfTheSquareAndItsBackwardTwoAndAHalfTimes) {
  const AttentionShape shape{.batch = 2, .seq = 8, .heads = 2, .groups = 2, .head_dim = 4};
  EXPECT_DOUBLE_EQ(attention_flops(shape, false), 4.0 * 2 * 2 * 8 * 8 * 4);
  EXPECT_DOUBLE_EQ(attention_flops(shape, true), 2.0 * 2 * 2 * 8 * 8 * 4);
  Tensor qkv = filled({16, shape.qkv_width()}, 0.1f), out = filled({16, 8}, 0.0f);
  Tensor lse = filled({2, 2, 8}, 0.0f), dout = filled({16, 8}, 1.0f);
  Tensor dqkv = filled({16, shape.qkv_width()}, 0.0f);
  const AttentionOptions options{.scale = 0.5f, .causal = true};
  backend.start();
  backend.begin_step(1);
  backend.attention_forward(qkv, shape, options, out, lse);
  backend.attention_backward(qkv, out, dout, lse, shape, options, dqkv);
  const ProfileRecord record = backend.finish();
  ASSERT_EQ(record.calls.size(), 2u);
  EXPECT_EQ(record.calls[0].shapes, "batch 2 seq 8 heads 2/2 dim 4 causal f32");
  EXPECT_DOUBLE_EQ(record.calls[0].flops, attention_flops(shape, true));
  EXPECT_DOUBLE_EQ(record.calls[1].flops, 2.5 * attention_flops(shape, true));
}

TEST_F(ProfilingBackendTest, ThePeakMemoryIsThatOfTheProfiledSteps) {
  { Tensor before = filled({1024, 1024}, 0.0f); }  // 4 MiB, freed before profiling starts
  backend.start();
  backend.begin_step(1);
  Tensor during = filled({64, 64}, 0.0f);
  const ProfileRecord record = backend.finish();
  EXPECT_LT(record.peak_bytes, int64_t{1} << 20);
  EXPECT_GE(record.peak_bytes, int64_t(during.bytes()));
}

TEST_F(ProfilingBackendTest, TheHostClockMeasuresTheTimeBetweenMarks) {
  HostClock clock;
  const int64_t a = clock.mark(), b = clock.mark();
  EXPECT_EQ(b, a + 1);
  EXPECT_GE(clock.elapsed_ms(a, b), 0.0);
  clock.clear();
  EXPECT_EQ(clock.mark(), 0);
}

}  // namespace profiling_backend_test
}  // namespace megatron::tensor
