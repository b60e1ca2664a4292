// The backend's answer for an attention spec: which kernel runs it and what the plan prints, or
// why the device cannot; the planner asks the same question by device, before a backend exists.
#include "tensor/attention_spec.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tensor/cpu_backend.hpp"

namespace megatron::tensor {
namespace attention_support_test {

using ::testing::HasSubstr;

TEST(AttentionSupport, TheCpuBackendRunsACausalSpecWithItsFlashKernel) {
  const CpuBackend backend(1);
  const AttentionSupport s = backend.supports({}, 64, DType::F32);
  EXPECT_EQ(s.kernel, AttentionKernel::Flash);
  EXPECT_EQ(s.implementation, "cpu flash attention");
  EXPECT_EQ(s.refusal, "");
}

TEST(AttentionSupport, AScoreBiasOrCrossAttentionTakesTheScoreKernel) {
  const CpuBackend backend(1);
  for (const AttentionSpec spec : {AttentionSpec{.score_bias = true}, AttentionSpec{.cross = true}}) {
    const AttentionSupport s = backend.supports(spec, 64, DType::F32);
    EXPECT_EQ(s.kernel, AttentionKernel::Scores);
    EXPECT_EQ(s.implementation, "cpu attention over each head's score rows");
  }
}

TEST(AttentionSupport, AKeyValueCacheAddsCachedAttentionForGeneration) {
  const CpuBackend backend(1);
  EXPECT_EQ(backend.supports({.kv_cache = true}, 64, DType::F32).implementation,
            "cpu flash attention; generation: cached attention");
}

TEST(AttentionSupport, TheBackendAnswersAsThePlannerDoesForItsDevice) {
  const CpuBackend backend(1);
  const AttentionSpec spec{.mask = AttentionMask::Padding, .rotary = true};
  const AttentionSupport by_backend = backend.supports(spec, 256, DType::Bf16);
  const AttentionSupport by_device = attention_support(Device::Cpu, spec, 256, DType::Bf16);
  EXPECT_EQ(by_backend.implementation, by_device.implementation);
  EXPECT_EQ(by_backend.refusal, by_device.refusal);
}

TEST(AttentionSupport, CudaRefusesHeadsWiderThanItsKernelsAndTheCpuDoesNot) {
  EXPECT_THAT(attention_support(Device::Cuda, {}, 256, DType::Bf16).refusal,
              HasSubstr("attention heads of 256 channels are wider than the CUDA attention's 128"));
  EXPECT_EQ(attention_support(Device::Cuda, {}, 128, DType::Bf16).refusal, "");
  EXPECT_EQ(attention_support(Device::Cpu, {}, 256, DType::Bf16).refusal, "");
}

}  // namespace attention_support_test
}  // namespace megatron::tensor
