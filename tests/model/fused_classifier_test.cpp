// The fused classifier (ModelConfig::fused_classifier): the LM head's output layer and
// cross-entropy run a chunk of rows at a time in the forward, computing their gradients there,
// and give the losses and gradients of the unfused head, which keeps the whole f32 logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "model/language_model.hpp"
#include "model/tiny_gpt.hpp"
#include "tensor/cpu_backend.hpp"

namespace megatron::model {
namespace {

using test_support::tiny_batch;

struct Step {
  Losses losses;
  std::vector<std::vector<float>> grads;  // every parameter's, in creation order
  std::vector<std::string> names;
  int64_t peak_bytes = 0;                 // of the forward and backward
};

// Chunks of `rows` rows of f32 logits: a tiny batch then spans several chunks.
ModelConfig chunked(ModelConfig c, int64_t rows) {
  c.classifier_chunk_bytes = rows * 4 * c.padded_vocab;
  c.classifier_chunk_min_rows = 1;
  return c;
}

// One training step of `c` on `batch_size` sequences, as pipeline_step runs it: the forward told
// the loss gradient's numerator, the backward given the same numerator over the tokens.
Step train_step(const ModelConfig& c, bool fused, int64_t batch_size = 3, int threads = 1) {
  tensor::CpuBackend b(threads);
  ModelConfig config = c;
  config.fused_classifier = fused;
  LanguageModel m(b, config);
  m.initialise(17);
  const Batch batch = tiny_batch(b, config, batch_size);
  const double numerator = 0.75;  // a loss scale over the micro-batches
  Pass pass{.backend = b, .training = true, .seed = 4, .iteration = 2};
  pass.loss_grad_numerator = numerator;
  m.parameters().zero_grads();
  b.reset_peak_memory();
  Step out;
  Activations saved;
  out.losses = m.forward(pass, batch, &saved);
  m.backward(pass, batch, saved,
             {.token = float(numerator / std::max(out.losses.tokens, 1.0)),
              .sentence = float(numerator / std::max(out.losses.sentences, 1.0))});
  out.peak_bytes = b.memory().peak_bytes;
  for (const auto& p : m.parameters().all()) {
    out.grads.push_back(tensor::to_floats(b, p->grad));
    out.names.push_back(p->name);
  }
  return out;
}

// Each gradient element within `relative` of its tensor's largest element.
void expect_same_gradients(const Step& fused, const Step& unfused, double relative) {
  ASSERT_EQ(fused.grads.size(), unfused.grads.size());
  for (size_t i = 0; i < fused.grads.size(); ++i) {
    const std::vector<float>&f = fused.grads[i], &u = unfused.grads[i];
    ASSERT_EQ(f.size(), u.size()) << unfused.names[i];
    float largest = 0.0f;
    for (float v : u) largest = std::max(largest, std::abs(v));
    ASSERT_GT(largest, 0.0f) << unfused.names[i] << " has no gradient";
    for (size_t j = 0; j < f.size(); ++j) {
      ASSERT_NEAR(f[j], u[j], relative * largest) << unfused.names[i] << "[" << j << "]";
    }
  }
}

// f32: each row's logits, loss and input gradient are the same operations either way; only the
// output weight's and bias's gradients are summed chunk by chunk instead of over all rows at
// once, which reorders f32 additions: about 1e-7 relative per sum, so 1e-5 of each tensor's
// largest element, far below a wrong scale or a dropped chunk (of order 1).
constexpr double kF32Tolerance = 1e-5;

void expect_fused_matches_unfused(const ModelConfig& c, double tolerance = kF32Tolerance) {
  const Step fused = train_step(c, true), unfused = train_step(c, false);
  EXPECT_NEAR(fused.losses.lm, unfused.losses.lm, 1e-6 * unfused.losses.lm);
  EXPECT_EQ(fused.losses.tokens, unfused.losses.tokens);
  EXPECT_EQ(fused.losses.sop, unfused.losses.sop);
  expect_same_gradients(fused, unfused, tolerance);
}

TEST(FusedClassifier, GptGivesTheUnfusedLossesAndGradientsOfEveryParameter) {
  // 15 rows in chunks of 4: three whole chunks and a short one.
  expect_fused_matches_unfused(chunked(test_support::tiny_gpt_config(), 4));
}

TEST(FusedClassifier, OneRowPerChunkGivesTheUnfusedGradients) {
  expect_fused_matches_unfused(chunked(test_support::tiny_gpt_config(), 1));
}

TEST(FusedClassifier, AnUntiedOutputLayerGetsTheUnfusedGradients) {
  expect_fused_matches_unfused(chunked(test_support::tiny_llama_config(), 4));
}

TEST(FusedClassifier, BertsTransformAndOutputBiasGetTheUnfusedGradients) {
  expect_fused_matches_unfused(chunked(test_support::tiny_bert_config(), 4));
}

TEST(FusedClassifier, T5sDecoderHeadGivesTheUnfusedLossesAndGradients) {
  expect_fused_matches_unfused(chunked(test_support::as_t5(test_support::tiny_gpt_config(), 2, 4), 3));
}

// bf16: the logits' gradient is narrowed to bf16 before the output layer's GEMMs either way, row
// for row the same; the weight gradient's f32 sums are reordered as in f32, but each term is a
// product of bf16 values whose rounding (2^-8 relative) the reordering can expose a little more.
TEST(FusedClassifier, Bf16GivesTheUnfusedLossesAndGradients) {
  ModelConfig c = chunked(test_support::tiny_gpt_config(), 4);
  c.dtype = tensor::DType::Bf16;
  expect_fused_matches_unfused(c, 1e-3);
}

TEST(FusedClassifier, LossesAndGradientsAreTheSameOnAnyNumberOfThreads) {
  const ModelConfig c = chunked(test_support::tiny_gpt_config(), 4);
  const Step one = train_step(c, true, 3, 1), three = train_step(c, true, 3, 3);
  EXPECT_EQ(one.losses.lm, three.losses.lm);
  EXPECT_EQ(one.grads, three.grads);
}

// Evaluation (no saved activations) and a forward that is not told the loss gradient take the
// unfused head: nothing is accumulated into the gradients during the forward.
TEST(FusedClassifier, AForwardWithoutTheLossGradientLeavesTheGradientsAlone) {
  tensor::CpuBackend b(1);
  const ModelConfig c = test_support::tiny_gpt_config();
  LanguageModel m(b, c);
  m.initialise(3);
  const Batch batch = tiny_batch(b, c, 2);
  m.parameters().zero_grads();
  Activations saved;
  m.forward({.backend = b}, batch, &saved);
  Pass evaluation{.backend = b, .training = false};
  evaluation.loss_grad_numerator = 1.0;
  m.forward(evaluation, batch, nullptr);
  for (const auto& p : m.parameters().all()) {
    const std::vector<float> g = tensor::to_floats(b, p->grad);
    EXPECT_TRUE(std::all_of(g.begin(), g.end(), [](float v) { return v == 0.0f; })) << p->name;
  }
}

// The point of it: with a vocabulary much larger than the hidden size, the whole [rows, V] f32
// logits dominate the head's memory; fused, only a chunk of them and the [rows, H] gradient of
// the head's input exist. A count of the backend's allocations, not a timing.
TEST(FusedClassifier, PeakMemoryIsLowerByAboutTheLogitsForALargeVocabulary) {
  ModelConfig c = test_support::tiny_gpt_config();
  c.vocab = 4000;
  c.padded_vocab = 4096;
  c = chunked(c, 2);
  const int64_t batch = 8;
  const double logits = 4.0 * double(batch * c.seq_length * c.padded_vocab);  // 640 KiB
  const Step fused = train_step(c, true, batch), unfused = train_step(c, false, batch);
  EXPECT_LT(double(fused.peak_bytes), double(unfused.peak_bytes) - 0.8 * logits)
      << "fused " << fused.peak_bytes << " B, unfused " << unfused.peak_bytes << " B";
}

}  // namespace
}  // namespace megatron::model
