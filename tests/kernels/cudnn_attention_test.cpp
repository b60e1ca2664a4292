// cuDNN attention (tensor/cuda_cudnn_attention): every graph the shipped recipes need builds and
// validates for Hopper and Ampere without a GPU (so a shape or layout mistake fails in CI); on a
// GPU, its outputs and gradients follow the flash kernels', its dropout keeps the expected
// fraction, and a fixed seed repeats bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "cuda_harness.hpp"
#include "plan/shape.hpp"
#include "recipe/compile.hpp"
#include "tensor/cuda_cudnn_attention.hpp"

namespace megatron::test_support {
namespace {

using tensor::AttentionOptions;
using tensor::AttentionShape;

// The attention one CUDA rank of `recipe` runs: its heads and groups under tensor parallelism,
// its micro batch and sequence, its mask and dropout. T5 runs the relative-position kernels.
struct RecipeAttention {
  AttentionShape shape;
  AttentionOptions options;
  DType dtype;
};

std::vector<std::pair<std::string, RecipeAttention>> shipped_attention() {
  std::vector<std::pair<std::string, RecipeAttention>> out;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::path(MEGATRON_SOURCE_DIR) / "recipes")) {
    if (entry.path().extension() != ".yaml") continue;
    const auto compiled = recipe::compile(entry.path());
    const plan::ModelShape x = plan::shape_of(compiled);
    if (x.arch == recipe::Arch::T5) continue;
    RecipeAttention a;
    a.shape = {.batch = x.b, .seq = x.s / x.c, .heads = x.a / x.t, .groups = x.g / x.t,
               .head_dim = x.d};
    a.options.scale = static_cast<float>(1 / std::sqrt(double(x.d)));
    a.options.causal = x.arch == recipe::Arch::Gpt;
    a.options.dropout = static_cast<float>(x.attention_dropout);
    if (x.arch == recipe::Arch::Bert) a.options.key_lengths.assign(size_t(x.b), x.s);
    // f32 recipes keep the flash kernels; their shapes are checked in bf16 all the same.
    a.dtype = x.dtype == recipe::DType::F16 ? DType::F16 : DType::Bf16;
    out.emplace_back(entry.path().filename().string(), a);
  }
  return out;
}

TEST(CudnnAttentionGraphs, EveryShippedRecipesAttentionValidatesForHopperAndAmpere) {
  if (!tensor::cudnn_attention_built())
    GTEST_SKIP() << "this build has no cuDNN attention (run scripts/install-deps.sh)";
  const auto recipes = shipped_attention();
  ASSERT_GE(recipes.size(), 6u);
  for (const auto& [name, a] : recipes)
    for (int sm : {90, 80})
      for (bool backward : {false, true}) {
        SCOPED_TRACE(name + " sm_" + std::to_string(sm) + (backward ? " backward" : " forward"));
        EXPECT_EQ(tensor::validate_cudnn_attention(a.shape, a.options, a.dtype, backward, sm), "");
      }
}

TEST(CudnnAttentionGraphs, GroupedQueriesPaddingAndDropoutTogetherValidate) {
  if (!tensor::cudnn_attention_built())
    GTEST_SKIP() << "this build has no cuDNN attention (run scripts/install-deps.sh)";
  AttentionOptions o{.scale = 0.125f, .causal = true, .dropout = 0.1f};
  o.key_lengths = {100, 256};
  for (bool backward : {false, true})
    EXPECT_EQ(tensor::validate_cudnn_attention({2, 256, 8, 2, 64}, o, DType::Bf16, backward, 90), "");
}

TEST(CudnnAttentionGraphs, F32DocumentMasksAndOddHeadDimsStayWithTheFlashKernels) {
  const AttentionShape shape{1, 128, 4, 4, 64};
  EXPECT_FALSE(tensor::cudnn_attention_supports(shape, {}, DType::F32));
  AttentionOptions documents;
  documents.first_keys.assign(128, 0);
  EXPECT_FALSE(tensor::cudnn_attention_supports(shape, documents, DType::Bf16));
  EXPECT_FALSE(tensor::cudnn_attention_supports({1, 128, 4, 4, 20}, {}, DType::Bf16));
  EXPECT_EQ(tensor::cudnn_attention_supports(shape, {}, DType::Bf16),
            tensor::cudnn_attention_built());
}

// On a GPU: the backend with cuDNN against the same backend's flash kernels.
class CudnnAttention : public CudaOpTest {
 protected:
  void SetUp() override {
    CudaOpTest::SetUp();
    if (IsSkipped()) return;
    if (!tensor::cudnn_attention_built()) GTEST_SKIP() << "this build has no cuDNN attention";
    flash_ = std::make_unique<CudaBackend>(tensor::CudaOptions{.cudnn_attention = false});
  }

  struct Result {
    std::vector<float> out, lse, dqkv;
  };
  Result run(Backend& b, const AttentionShape& s, const AttentionOptions& o) {
    const int64_t rows = s.batch * s.seq;
    auto bf16 = [&](const Shape& shape, uint32_t seed) {
      Tensor f32 = b.empty(shape, DType::F32);
      b.write(f32, random_floats(size_t(tensor::numel(shape)), seed).data());
      Tensor x = b.empty(shape, DType::Bf16);
      b.copy(f32, x);
      return x;
    };
    const Tensor qkv = bf16({rows, s.qkv_width()}, 1);
    const Tensor dout = bf16({rows, s.heads * s.head_dim}, 2);
    Tensor out = b.empty({rows, s.heads * s.head_dim}, DType::Bf16);
    Tensor lse = b.empty({s.batch, s.heads, s.seq}, DType::F32);
    Tensor dqkv = b.empty(qkv.shape(), DType::Bf16);
    b.attention_forward(qkv, s, o, out, lse);
    b.attention_backward(qkv, out, dout, lse, s, o, dqkv);
    return {tensor::to_floats(b, out), tensor::to_floats(b, lse), tensor::to_floats(b, dqkv)};
  }

  std::unique_ptr<CudaBackend> flash_;
};

TEST_F(CudnnAttention, OutputsAndGradientsFollowTheFlashKernels) {
  for (const AttentionShape s : {AttentionShape{2, 256, 8, 8, 64}, AttentionShape{2, 200, 8, 2, 128}})
    for (bool causal : {true, false}) {
      const AttentionOptions o{.scale = 0.1f, .causal = causal};
      const Result want = run(*flash_, s, o), got = run(gpu(), s, o);
      expect_close(got.out, want.out, 2 * tolerance_for(DType::Bf16), 1e-2, "out");
      expect_close(got.lse, want.lse, 1e-3, 1e-3, "lse");
      expect_close(got.dqkv, want.dqkv, 2 * tolerance_for(DType::Bf16), 2e-2, "dqkv");
    }
}

TEST_F(CudnnAttention, PaddingMaskFollowsTheFlashKernels) {
  AttentionOptions o{.scale = 0.1f, .causal = false};
  o.key_lengths = {37, 128};
  const AttentionShape s{2, 128, 4, 4, 64};
  const Result want = run(*flash_, s, o), got = run(gpu(), s, o);
  expect_close(got.out, want.out, 2 * tolerance_for(DType::Bf16), 1e-2, "out");
  expect_close(got.dqkv, want.dqkv, 2 * tolerance_for(DType::Bf16), 2e-2, "dqkv");
}

TEST_F(CudnnAttention, AFixedSeedRepeatsBitForBitAndDropoutIsUnbiased) {
  const AttentionShape s{2, 256, 8, 8, 64};
  const AttentionOptions dropped{.scale = 0.1f, .causal = false, .dropout = 0.2f,
                                 .rng = {.seed = 7, .stream = 3}};
  const Result a = run(gpu(), s, dropped), b = run(gpu(), s, dropped);
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.dqkv, b.dqkv);
  // Dropout rescales the kept probabilities by 1/(1-p): on average the output is unchanged.
  const Result plain = run(gpu(), s, {.scale = 0.1f, .causal = false});
  double dropped_sum = 0, plain_sum = 0;
  for (size_t i = 0; i < a.out.size(); ++i) {
    dropped_sum += std::fabs(a.out[i]);
    plain_sum += std::fabs(plain.out[i]);
  }
  EXPECT_NE(a.out, plain.out);
  EXPECT_NEAR(dropped_sum / plain_sum, 1.0, 0.1);
}

}  // namespace
}  // namespace megatron::test_support
