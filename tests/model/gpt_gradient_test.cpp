// The whole model's backward (GPT, Llama-style, BERT) against finite differences of its forward,
// over every weight.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model/language_model.hpp"
#include "model/tiny_gpt.hpp"
#include "tensor/cpu_backend.hpp"
#include "tensor/gradcheck.hpp"

namespace megatron::model {
namespace {

using model::Recompute;
using test_support::tiny_batch;

// The objective (mean masked token loss, plus the mean sentence-order loss with a binary head).
double objective(const Losses& sum) {
  return (sum.tokens > 0 ? sum.lm / sum.tokens : 0.0) + (sum.sentences > 0 ? sum.sop / sum.sentences : 0.0);
}

// The objective as a function of one parameter's values.
double loss_with(tensor::Backend& b, LanguageModel& m, const Batch& batch, Parameter& p,
                 const std::vector<float>& values, const Pass& pass) {
  tensor::write_floats(b, p.value, values);
  return objective(m.forward(pass, batch, nullptr));
}

// Checks every parameter's gradient of the objective. Finite differences in f32 with a step of
// 5e-3 on weights of scale 0.2: the truncation error is O(step^2) relative and the rounding
// error about 1e-7 * |loss| / step; both stay under 2e-3 of the largest gradient element.
// first_keys: documents packed into the batch's sequences (Batch::first_keys); empty: none.
// The LM head is fused (the default) and its chunks hold 3 of the batch's 10 rows, so the
// gradients it computes in the forward are checked over several chunks.
void expect_gradients_match_finite_differences(const ModelConfig& config, bool training,
                                               Recompute recompute = Recompute::None,
                                               std::vector<int64_t> first_keys = {}) {
  tensor::CpuBackend b(1);
  ModelConfig c = config;
  c.classifier_chunk_bytes = 3 * 4 * c.padded_vocab;
  c.classifier_chunk_min_rows = 1;
  c.recompute = recompute;
  c.recompute_layers = recompute == Recompute::Full ? c.num_layers : 0;
  LanguageModel m(b, c);
  m.initialise(42);
  Batch batch = tiny_batch(b, c, 2);
  batch.first_keys = std::move(first_keys);
  // Training passes run dropout (when the config has it); evaluation passes of the same key
  // would not, so the finite differences use a training pass too: the mask depends only on
  // the key, so every forward sees the same one.
  // The objective's token weight 1 / tokens, told to the forward as pipeline_step does.
  const Pass pass{.backend = b, .training = training, .seed = 5, .iteration = 3,
                  .loss_grad_numerator = 1.0};

  m.parameters().zero_grads();
  Activations saved;
  const Losses sum = m.forward(pass, batch, &saved);
  m.backward(pass, batch, saved,
             {.token = float(1.0 / std::max(sum.tokens, 1.0)),
              .sentence = float(1.0 / std::max(sum.sentences, 1.0))});

  for (const auto& p : m.parameters().all()) {
    const std::vector<float> original = tensor::to_floats(b, p->value);
    std::vector<double> numeric(original.size());
    std::vector<float> x = original;
    for (size_t i = 0; i < x.size(); ++i) {
      const float eps = 5e-3f;
      x[i] = original[i] + eps;
      const double plus = loss_with(b, m, batch, *p, x, pass);
      x[i] = original[i] - eps;
      const double minus = loss_with(b, m, batch, *p, x, pass);
      x[i] = original[i];
      numeric[i] = (plus - minus) / (2.0 * eps);
    }
    tensor::write_floats(b, p->value, original);
    test_support::expect_gradient_near(tensor::to_floats(b, p->grad), numeric, 3e-3, 1e-5,
                                       p->name.c_str());
  }
}

TEST(GptGradients, GptShapedModelMatchesFiniteDifferences) {
  expect_gradients_match_finite_differences(test_support::tiny_gpt_config(), false);
}

TEST(GptGradients, UnfusedClassifierMatchesFiniteDifferences) {
  ModelConfig c = test_support::tiny_gpt_config();
  c.fused_classifier = false;
  expect_gradients_match_finite_differences(c, false);
}

TEST(GptGradients, LlamaShapedModelMatchesFiniteDifferences) {
  expect_gradients_match_finite_differences(test_support::tiny_llama_config(), false);
}

// Qwen3's q/k norms: their weights' gradients and what flows through them to linear_qkv, with
// the core recomputed from the kept (normed, rotated) qkv.
TEST(GptGradients, QkNormsInALlamaShapeMatchFiniteDifferences) {
  ModelConfig c = test_support::tiny_llama_config();
  c.qk_norm = true;
  expect_gradients_match_finite_differences(c, false);
  expect_gradients_match_finite_differences(c, false, Recompute::Selective);
}

TEST(GptGradients, ModelWithDropoutMatchesFiniteDifferences) {
  ModelConfig c = test_support::tiny_gpt_config();
  c.hidden_dropout = 0.2;
  c.attention_dropout = 0.2;
  expect_gradients_match_finite_differences(c, true);
}

// Two sequences of 5: documents at 0..1 and 2..4, then at 0 and 1..4.
const std::vector<int64_t> kPackedDocuments = {0, 0, 2, 2, 2, 0, 1, 1, 1, 1};

TEST(GptGradients, PackedDocumentsMatchFiniteDifferences) {
  expect_gradients_match_finite_differences(test_support::tiny_gpt_config(), false, Recompute::None,
                                            kPackedDocuments);
}

TEST(GptGradients, PackedDocumentsWithDropoutAndRecomputeInALlamaShapeMatchFiniteDifferences) {
  ModelConfig c = test_support::tiny_llama_config();
  c.hidden_dropout = 0.2;
  c.attention_dropout = 0.2;
  expect_gradients_match_finite_differences(c, true, Recompute::Selective, kPackedDocuments);
}

// A document packed after another scores exactly as it would at the start of its own sequence
// when its positions restart: nothing of the first document reaches it.
TEST(GptPackedDocuments, ADocumentScoresAsItWouldAtTheStartOfItsOwnSequence) {
  tensor::CpuBackend b(1);
  const ModelConfig c = test_support::tiny_gpt_config();
  LanguageModel m(b, c);
  m.initialise(5);
  // Sequence: [x x | d0 d1 d2], the document d scored; alone: [d0 d1 d2 y y], d scored.
  const std::vector<int32_t> doc = {3, 7, 1}, next = {7, 1, 9};
  const auto batch_of = [&](std::vector<int32_t> tokens, std::vector<int32_t> labels,
                            std::vector<float> mask, std::vector<int32_t> positions,
                            std::vector<int64_t> first_keys) {
    return Batch{.batch = 1,
                 .seq = 5,
                 .tokens = tensor::from_ints(b, tokens, {5}),
                 .labels = tensor::from_ints(b, labels, {5}),
                 .loss_mask = tensor::from_floats(b, mask, {5}),
                 .positions = tensor::from_ints(b, positions, {5}),
                 .first_keys = std::move(first_keys)};
  };
  const Pass pass{.backend = b, .training = false};
  const Losses packed = m.forward(pass,
                                  batch_of({5, 6, doc[0], doc[1], doc[2]}, {6, 2, next[0], next[1], next[2]},
                                           {0, 0, 1, 1, 1}, {0, 1, 0, 1, 2}, {0, 0, 2, 2, 2}),
                                  nullptr);
  const Losses alone = m.forward(pass,
                                 batch_of({doc[0], doc[1], doc[2], 4, 4}, {next[0], next[1], next[2], 4, 4},
                                          {1, 1, 1, 0, 0}, {0, 1, 2, 3, 4}, {}),
                                 nullptr);
  EXPECT_NEAR(packed.lm, alone.lm, 1e-6 * alone.lm);
  // Without the mask the first document's tokens reach the second's scores.
  const Losses crossing = m.forward(pass,
                                    batch_of({5, 6, doc[0], doc[1], doc[2]}, {6, 2, next[0], next[1], next[2]},
                                             {0, 0, 1, 1, 1}, {0, 1, 0, 1, 2}, {}),
                                    nullptr);
  EXPECT_GT(std::abs(crossing.lm - alone.lm), 1e-4);
}

TEST(GptGradients, ExactGeluTanhAndUntiedOutputMatchFiniteDifferences) {
  ModelConfig c = test_support::tiny_gpt_config();
  c.activation = model::Activation::GeluTanh;
  c.tie_embeddings = false;
  c.groups = 1;
  expect_gradients_match_finite_differences(c, false);
}

TEST(BertGradients, BertShapedModelMatchesFiniteDifferences) {
  expect_gradients_match_finite_differences(test_support::tiny_bert_config(), false);
}

TEST(BertGradients, BertWithDropoutMatchesFiniteDifferences) {
  ModelConfig c = test_support::tiny_bert_config();
  c.hidden_dropout = 0.2;
  c.attention_dropout = 0.2;
  expect_gradients_match_finite_differences(c, true);
}

// Classification fine-tuning: the classifier replaces the LM head; BERT's reads the pooled [CLS],
// GPT's each sequence's last real token.
TEST(ClassifierGradients, BertClassifierOnThePooledFirstTokenMatchesFiniteDifferences) {
  ModelConfig c = test_support::tiny_bert_config();
  c.binary_head = false;
  c.classes = 3;
  c.pooler = true;
  expect_gradients_match_finite_differences(c, false);
}

TEST(ClassifierGradients, GptClassifierOnTheLastTokenMatchesFiniteDifferences) {
  ModelConfig c = test_support::tiny_gpt_config();
  c.classes = 3;
  expect_gradients_match_finite_differences(c, false);
}

TEST(ClassifierHeads, AClassifierHasNoLanguageModelHeadAndCountsItsRightAnswers) {
  tensor::CpuBackend b(1);
  ModelConfig c = test_support::tiny_gpt_config();
  c.classes = 3;
  LanguageModel m(b, c);
  m.initialise(3);
  for (const auto& p : m.parameters().all()) {
    EXPECT_EQ(p->name.find("output_layer"), std::string::npos) << p->name;
  }
  const Batch batch = tiny_batch(b, c, 2);
  HeadOutputs out;
  const Losses sum = m.forward({.backend = b, .training = false}, batch, nullptr, &out);
  EXPECT_EQ(sum.tokens, 0.0);
  EXPECT_EQ(sum.sentences, 2.0);
  ASSERT_EQ(out.sentence_logits.size(), 6u);
  double correct = 0.0, loss = 0.0;
  for (int s = 0; s < 2; ++s) {
    const float* l = out.sentence_logits.data() + 3 * s;
    const int target = batch.sentence_order[size_t(s)];
    correct += (std::max_element(l, l + 3) - l) == target ? 1.0 : 0.0;
    const double mx = *std::max_element(l, l + 3);
    loss += mx + std::log(std::exp(l[0] - mx) + std::exp(l[1] - mx) + std::exp(l[2] - mx)) - l[target];
  }
  EXPECT_EQ(sum.correct, correct);
  EXPECT_NEAR(sum.sop, loss, 1e-6);
}

TEST(BertHeads, AskedForOutputsHoldEachTokensLossAndTheLogits) {
  tensor::CpuBackend b(1);
  const ModelConfig c = test_support::tiny_bert_config();
  LanguageModel m(b, c);
  m.initialise(11);
  const Batch batch = tiny_batch(b, c, 2);
  HeadOutputs out{.want_token_losses = true, .want_logits = true};
  const Losses sum = m.forward({.backend = b, .training = false}, batch, nullptr, &out);
  ASSERT_EQ(out.token_losses.numel(), batch.rows());
  ASSERT_EQ(out.logits.dim(0), batch.rows());
  ASSERT_EQ(out.logits.dim(1), c.padded_vocab);
  ASSERT_EQ(out.sentence_logits.size(), 4u);
  const std::vector<float> losses = tensor::to_floats(b, out.token_losses);
  const std::vector<float> logits = tensor::to_floats(b, out.logits);
  const std::vector<int32_t> labels = tensor::to_ints(b, batch.labels);
  const std::vector<float> mask = tensor::to_floats(b, batch.loss_mask);
  double masked = 0.0;
  for (int64_t i = 0; i < batch.rows(); ++i) {
    // Each token's loss is log-sum-exp of its logits minus the label's logit.
    double max = -1e30, total = 0.0;
    for (int64_t v = 0; v < c.padded_vocab; ++v) max = std::max<double>(max, logits[size_t(i * c.padded_vocab + v)]);
    for (int64_t v = 0; v < c.padded_vocab; ++v) total += std::exp(logits[size_t(i * c.padded_vocab + v)] - max);
    const double expected = max + std::log(total) - logits[size_t(i * c.padded_vocab + labels[size_t(i)])];
    EXPECT_NEAR(losses[size_t(i)], expected, 1e-4) << "token " << i;
    masked += mask[size_t(i)] * losses[size_t(i)];
  }
  EXPECT_NEAR(sum.lm, masked, 1e-4);
}

// Recompute must not change a single bit: the recomputed forward draws the same dropout masks
// and runs the same ops in the same order.
std::vector<std::vector<float>> gradients(Recompute recompute) {
  tensor::CpuBackend b(1);
  ModelConfig c = test_support::tiny_llama_config();
  c.hidden_dropout = 0.1;
  c.attention_dropout = 0.1;
  c.recompute = recompute;
  c.recompute_layers = recompute == Recompute::Full ? 1 : 0;
  LanguageModel m(b, c);
  m.initialise(3);
  const Batch batch = tiny_batch(b, c, 3);
  const Pass pass{.backend = b, .training = true, .seed = 9, .iteration = 1};
  Activations saved;
  const Losses sum = m.forward(pass, batch, &saved);
  m.backward(pass, batch, saved, {.token = float(1.0 / sum.tokens)});
  std::vector<std::vector<float>> grads;
  for (const auto& p : m.parameters().all()) grads.push_back(tensor::to_floats(b, p->grad));
  return grads;
}

TEST(GptRecompute, SelectiveRecomputeGivesBitwiseTheSameGradients) {
  EXPECT_EQ(gradients(Recompute::Selective), gradients(Recompute::None));
}

TEST(GptRecompute, FullRecomputeGivesBitwiseTheSameGradients) {
  EXPECT_EQ(gradients(Recompute::Full), gradients(Recompute::None));
}

TEST(GptRecompute, FullRecomputeKeepsOnlyTheBlockInputs) {
  tensor::CpuBackend b(1);
  ModelConfig c = test_support::tiny_gpt_config();
  auto activation_bytes = [&](Recompute r) {
    c.recompute = r;
    c.recompute_layers = r == Recompute::Full ? c.num_layers : 0;
    LanguageModel m(b, c);
    const Batch batch = tiny_batch(b, c, 2);
    const int64_t before = b.memory().allocated_bytes;
    Activations saved;
    m.forward({.backend = b}, batch, &saved);
    return b.memory().allocated_bytes - before;
  };
  const int64_t none = activation_bytes(Recompute::None);
  const int64_t selective = activation_bytes(Recompute::Selective);
  const int64_t full = activation_bytes(Recompute::Full);
  EXPECT_LT(selective, none);
  EXPECT_LT(full, selective);
}

}  // namespace
}  // namespace megatron::model
