// Scoring (what `megatron eval` asks of a model): the chosen rows' label log-probabilities are
// the log-softmax of the full forward's logits over the unpadded vocabulary, and their logits
// are those rows' first columns.
#include <gtest/gtest.h>

#include <cmath>

#include "model/language_model.hpp"
#include "model/tiny_gpt.hpp"
#include "tensor/cpu_backend.hpp"
#include "tensor/host_io.hpp"

namespace megatron::model {
namespace {

TEST(Scoring, ChosenRowsGetTheLogSoftmaxOfTheirLabelOverTheUnpaddedVocabulary) {
  tensor::CpuBackend b(1);
  const ModelConfig c = test_support::tiny_gpt_config();  // vocab 11, padded to 16
  ASSERT_LT(c.vocab, c.padded_vocab);
  LanguageModel m(b, c);
  m.initialise(5);
  const Batch batch = test_support::tiny_batch(b, c, 2);
  HeadOutputs full{.want_logits = true};
  m.forward({.backend = b, .training = false}, batch, nullptr, &full);
  const std::vector<float> all = tensor::to_floats(b, full.logits);

  const std::vector<int32_t> rows = {1, 4, int32_t(batch.rows() - 1)}, labels = {3, 10, 0};
  HeadOutputs scored{.want_logits = true,
                     .score_rows = tensor::from_ints(b, rows, {3}),
                     .score_labels = tensor::from_ints(b, labels, {3}),
                     .score_vocab = c.vocab};
  const Losses losses = m.forward({.backend = b, .training = false}, batch, nullptr, &scored);
  EXPECT_EQ(losses.tokens, 0.0);  // scoring sums no loss
  const std::vector<float> logprobs = tensor::to_floats(b, scored.label_logprobs);
  const std::vector<float> logits = tensor::to_floats(b, scored.logits);
  ASSERT_EQ(scored.logits.dim(1), c.vocab);
  for (size_t i = 0; i < rows.size(); ++i) {
    const float* row = all.data() + size_t(rows[i]) * size_t(c.padded_vocab);
    double max = -1e30, total = 0.0;
    for (int64_t v = 0; v < c.vocab; ++v) max = std::max<double>(max, row[v]);
    for (int64_t v = 0; v < c.vocab; ++v) total += std::exp(row[v] - max);
    // f32 log-sum-exp over 11 columns against the same in double.
    EXPECT_NEAR(logprobs[i], row[labels[i]] - max - std::log(total), 1e-5) << "row " << rows[i];
    for (int64_t v = 0; v < c.vocab; ++v) EXPECT_EQ(logits[i * size_t(c.vocab) + size_t(v)], row[v]);
  }
}

}  // namespace
}  // namespace megatron::model
