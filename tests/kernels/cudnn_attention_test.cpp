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
namespace cudnn_attention_test {

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
    const plan::ModelShape x = plan::shape_of(compiled, plan::place(compiled));
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

// T5 recipes run the cross-attention op three ways: the encoder's self-attention (fused rows,
// relative-position bias, padding), the decoder's (fused, bias, causal) and cross-attention
// (q and kv apart, the encoder's padding).
TEST(CudnnAttentionGraphs, EveryShippedT5RecipesAttentionValidatesForHopperAndAmpere) {
  if (!tensor::cudnn_attention_built())
    GTEST_SKIP() << "this build has no cuDNN attention (run scripts/install-deps.sh)";
  int recipes = 0;
  const Tensor bias;  // only its presence and dtype matter to the graph
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::path(MEGATRON_SOURCE_DIR) / "recipes")) {
    if (entry.path().extension() != ".yaml") continue;
    const auto compiled = recipe::compile(entry.path());
    const plan::ModelShape x = plan::shape_of(compiled, plan::place(compiled));
    if (x.arch != recipe::Arch::T5) continue;
    ++recipes;
    const int64_t heads = x.a / x.t, groups = x.g / x.t;
    AttentionOptions encoder{.scale = 1.0f, .causal = false,
                             .dropout = static_cast<float>(x.attention_dropout)};
    encoder.key_lengths.assign(size_t(x.b), x.s);
    encoder.bias = &bias;
    encoder.bias_columns = x.a;
    AttentionOptions decoder = encoder;
    decoder.causal = true;
    decoder.key_lengths.clear();
    AttentionOptions cross = encoder;
    cross.bias = nullptr;
    const std::pair<tensor::CrossAttentionShape, AttentionOptions> calls[] = {
        {{x.b, x.s, x.s, heads, groups, x.d, true}, encoder},
        {{x.b, x.sd, x.sd, heads, groups, x.d, true}, decoder},
        {{x.b, x.sd, x.s, heads, groups, x.d, false}, cross}};
    for (const auto& [shape, options] : calls)
      for (int sm : {90, 80})
        for (bool backward : {false, true}) {
          SCOPED_TRACE(entry.path().filename().string() + " q " + std::to_string(shape.q_seq) +
                       " kv " + std::to_string(shape.kv_seq) + " sm_" + std::to_string(sm) +
                       (backward ? " backward" : " forward"));
          EXPECT_EQ(tensor::validate_cudnn_cross_attention(shape, options, DType::Bf16, backward,
                                                           sm),
                    "");
        }
  }
  EXPECT_GE(recipes, 2);
}

TEST(CudnnAttentionGraphs, GroupedQueriesPaddingAndDropoutTogetherValidate) {
  if (!tensor::cudnn_attention_built())
    GTEST_SKIP() << "this build has no cuDNN attention (run scripts/install-deps.sh)";
  AttentionOptions o{.scale = 0.125f, .causal = true, .dropout = 0.1f};
  o.key_lengths = {100, 256};
  for (bool backward : {false, true})
    EXPECT_EQ(tensor::validate_cudnn_attention({2, 256, 8, 2, 64}, o, DType::Bf16, backward, 90), "");
}

TEST(CudnnAttentionGraphs, T5sBiasedSelfAttentionAndCrossAttentionValidate) {
  if (!tensor::cudnn_attention_built())
    GTEST_SKIP() << "this build has no cuDNN attention (run scripts/install-deps.sh)";
  const Tensor bias;  // only its presence and dtype matter to the graph
  AttentionOptions self{.scale = 1.0f, .causal = false};
  self.key_lengths = {300, 512};
  self.bias = &bias;
  self.bias_columns = 12;
  AttentionOptions decoder{.scale = 1.0f, .causal = true};
  decoder.bias = &bias;
  decoder.bias_columns = 12;
  AttentionOptions cross{.scale = 1.0f, .causal = false};
  cross.key_lengths = {300, 512};
  const tensor::CrossAttentionShape packed{2, 512, 512, 12, 12, 64, true};
  const tensor::CrossAttentionShape decoder_shape{2, 114, 114, 12, 12, 64, true};
  const tensor::CrossAttentionShape apart{2, 114, 512, 12, 12, 64, false};
  for (int sm : {90, 80})
    for (bool backward : {false, true}) {
      SCOPED_TRACE("sm_" + std::to_string(sm) + (backward ? " backward" : " forward"));
      EXPECT_EQ(tensor::validate_cudnn_cross_attention(packed, self, DType::Bf16, backward, sm), "");
      EXPECT_EQ(tensor::validate_cudnn_cross_attention(decoder_shape, decoder, DType::Bf16,
                                                       backward, sm), "");
      EXPECT_EQ(tensor::validate_cudnn_cross_attention(apart, cross, DType::Bf16, backward, sm), "");
    }
}

TEST(CudnnAttentionGraphs, F32DocumentMasksAndOddHeadDimsStayWithTheFlashKernels) {
  const Tensor bias;
  AttentionOptions misaligned;
  misaligned.bias = &bias;
  misaligned.bias_columns = 12;
  misaligned.bias_offset = 6;  // a tensor-parallel rank's heads: 24 bytes in, not 16-aligned
  EXPECT_FALSE(tensor::cudnn_cross_attention_supports({1, 64, 64, 6, 6, 64, true}, misaligned,
                                                      DType::Bf16));
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

// T5's attention through the cross-attention op: the relative-position bias (and its
// gradient, accumulated into the bias's own columns) on fused rows, and q and kv apart with the
// encoder's padding; against the same backend's attention kernels.
TEST_F(CudnnAttention, CrossAttentionWithBiasAndPaddingFollowsTheKernels) {
  struct Case {
    tensor::CrossAttentionShape shape;
    bool bias, causal;
  };
  for (const Case c : {Case{{2, 96, 96, 4, 4, 64, true}, true, false},
                       Case{{2, 96, 96, 4, 4, 64, true}, true, true},
                       Case{{2, 40, 96, 4, 2, 64, false}, false, false}}) {
    const tensor::CrossAttentionShape& s = c.shape;
    Result got, want;
    for (Backend* b : {static_cast<Backend*>(&gpu()), static_cast<Backend*>(flash_.get())}) {
      auto bf16 = [&](const Shape& shape, uint32_t seed) {
        Tensor f32 = b->empty(shape, DType::F32);
        b->write(f32, random_floats(size_t(tensor::numel(shape)), seed).data());
        Tensor x = b->empty(shape, DType::Bf16);
        b->copy(f32, x);
        return x;
      };
      const Tensor q = bf16({s.batch * s.q_seq, s.q_width()}, 1);
      const Tensor kv = s.packed ? q : bf16({s.batch * s.kv_seq, s.kv_width()}, 2);
      const Tensor dout = bf16({s.batch * s.q_seq, s.out_width()}, 3);
      Tensor bias = b->empty({s.q_seq * s.kv_seq * 6}, DType::F32);
      b->write(bias, random_floats(size_t(bias.numel()), 4).data());
      Tensor dbias = b->zeros(bias.shape(), DType::F32);
      AttentionOptions o{.scale = 0.125f, .causal = c.causal};
      o.key_lengths = {s.kv_seq, s.kv_seq - 17};
      if (c.bias) {
        o.bias = &bias;
        o.bias_columns = 6;
        o.bias_offset = 0;
      }
      Tensor out = b->empty({s.batch * s.q_seq, s.out_width()}, DType::Bf16);
      Tensor lse = b->empty({s.batch, s.heads, s.q_seq}, DType::F32);
      b->cross_attention_forward(q, kv, s, o, out, lse);
      Tensor dq = b->zeros(q.shape(), DType::Bf16);
      Tensor dkv = s.packed ? dq : b->zeros(kv.shape(), DType::Bf16);
      b->cross_attention_backward(q, kv, out, dout, lse, s, o, dq, dkv, c.bias ? &dbias : nullptr);
      Result r{tensor::to_floats(*b, out), tensor::to_floats(*b, lse), tensor::to_floats(*b, dq)};
      if (!s.packed) {
        const auto more = tensor::to_floats(*b, dkv);
        r.dqkv.insert(r.dqkv.end(), more.begin(), more.end());
      }
      if (c.bias) {
        const auto more = tensor::to_floats(*b, dbias);
        r.dqkv.insert(r.dqkv.end(), more.begin(), more.end());
      }
      (b == &gpu() ? got : want) = std::move(r);
    }
    expect_close(got.out, want.out, 2 * tolerance_for(DType::Bf16), 1e-2, "out");
    expect_close(got.lse, want.lse, 1e-3, 1e-3, "lse");
    expect_close(got.dqkv, want.dqkv, 2 * tolerance_for(DType::Bf16), 2e-2, "gradients");
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

}  // namespace cudnn_attention_test
}  // namespace megatron::test_support
