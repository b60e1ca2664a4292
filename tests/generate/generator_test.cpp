// Megatron's static generation loop on a small random GPT: a batch of prompts of different
// lengths generates what each prompt generates alone, end-of-document and the length limits
// end a sequence as documented, and the log-probabilities cover every token after the first and
// match the full forward pass's log-softmax.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "data/tokenizer.hpp"
#include "generate/generator.hpp"
#include "generate/tiny_gpt.hpp"
#include "model/language_model.hpp"
#include "tensor/cpu_backend.hpp"
#include "tensor/host_io.hpp"

namespace megatron::generate {
namespace generator_test {

// The model of every test here (tiny_gpt.hpp): 16 positions.
struct Fixture : megatron::test_support::TinyGpt {};

GenerateOptions greedy(int64_t tokens) {
  GenerateOptions o;
  o.max_tokens = tokens;
  o.sampling.top_k = 1;
  return o;
}

TEST(Generator, ABatchOfDifferentLengthsGeneratesWhatEachPromptGeneratesAlone) {
  Fixture f;
  const std::vector<std::vector<int32_t>> prompts = {{5, 9, 13, 2, 7}, {40}, {3, 3, 8}};
  const auto together = generate(f.engine, prompts, greedy(6));
  ASSERT_EQ(together.size(), 3u);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto alone = generate(f.engine, {prompts[i]}, greedy(6));
    EXPECT_EQ(together[i].tokens, alone[0].tokens) << "prompt " << i;
    EXPECT_EQ(together[i].tokens.size(), prompts[i].size() + 6);
    EXPECT_EQ(together[i].finish_reason, "length");
  }
}

TEST(Generator, EndOfDocumentStopsASequenceAndIsLeftOutOfItsTokensAndText) {
  Fixture f;
  const std::vector<int32_t> prompt = {5, 9, 13};
  const auto free = generate(f.engine, {prompt}, greedy(8))[0];
  // The third generated token, made the end of document, must end the sequence before it.
  const int32_t stop = free.tokens[prompt.size() + 2];
  const auto first = std::find(free.tokens.begin() + ptrdiff_t(prompt.size()), free.tokens.end(), stop);
  GenerateOptions o = greedy(8);
  o.eod = stop;
  o.logprobs = true;
  const auto stopped = generate(f.engine, {prompt}, o)[0];
  EXPECT_EQ(stopped.finish_reason, "stop");
  EXPECT_EQ(stopped.tokens, std::vector<int32_t>(free.tokens.begin(), first));
  EXPECT_EQ(stopped.logprobs.size(), stopped.tokens.size() - 1);
  EXPECT_EQ(stopped.text, f.tokenizer->decode(std::span(stopped.tokens).subspan(prompt.size())));
}

TEST(Generator, TheModelsPositionsEndASequenceWithLength) {
  Fixture f;
  const auto out = generate(f.engine, {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}, greedy(100))[0];
  EXPECT_EQ(out.tokens.size(), 16u);  // max_positions
  EXPECT_EQ(out.finish_reason, "length");
}

TEST(Generator, LogprobsAreTheFullForwardsLogSoftmaxOfEveryTokenAfterTheFirst) {
  Fixture f;
  GenerateOptions o = greedy(5);
  o.logprobs = true;
  o.top_logprobs = 2;
  const auto g = generate(f.engine, {{5, 9, 13, 2}, {7, 7}}, o);
  for (const Generated& out : g) {
    ASSERT_EQ(out.logprobs.size(), out.tokens.size() - 1);
    ASSERT_EQ(out.top_logprobs.size(), out.tokens.size() - 1);
    // The same tokens through the whole forward pass at once.
    const int64_t n = int64_t(out.tokens.size());
    model::KvCache cache = f.model.make_cache(f.backend, 1, n);
    std::vector<int32_t> rows(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) rows[size_t(i)] = int32_t(i);
    const std::vector<float> logits = f.model.decode(f.backend, out.tokens, n, 0, cache, rows, 64);
    for (int64_t i = 0; i + 1 < n; ++i) {
      const std::span<const float> row(logits.data() + i * 64, 64);
      // f32 logits from two attention paths (~1e-6 apart), log-softmax in double.
      EXPECT_NEAR(out.logprobs[size_t(i)], log_probability(row, out.tokens[size_t(i + 1)]), 1e-4);
      // Greedy: each generated token is the top one.
      if (i + 1 >= out.prompt_tokens) EXPECT_EQ(out.top_logprobs[size_t(i)][0].first, out.tokens[size_t(i + 1)]);
    }
  }
}

TEST(Generator, ZeroTokensScoresThePromptOnly) {
  Fixture f;
  GenerateOptions o = greedy(0);
  o.logprobs = true;
  const auto out = generate(f.engine, {{5, 9, 13, 2}}, o)[0];
  EXPECT_EQ(out.tokens, (std::vector<int32_t>{5, 9, 13, 2}));
  EXPECT_EQ(out.logprobs.size(), 3u);
}

TEST(Generator, ANumberOfTokensPastAnyLimitStopsAtTheModelsPositions) {
  Fixture f;
  const auto out = generate(f.engine, {{1, 2, 3}}, greedy(std::numeric_limits<int64_t>::max()))[0];
  EXPECT_EQ(out.tokens.size(), 16u);
  EXPECT_EQ(out.finish_reason, "length");
}

TEST(Generator, AStopTokenEndsASequenceAndStaysInIt) {
  Fixture f;
  const std::vector<int32_t> prompt = {5, 9, 13};
  const auto free = generate(f.engine, {prompt}, greedy(8))[0];
  const int32_t stop = free.tokens[prompt.size() + 1];
  const auto first = std::find(free.tokens.begin() + ptrdiff_t(prompt.size()), free.tokens.end(), stop);
  GenerateOptions o = greedy(8);
  o.stop_tokens = {stop};
  const auto stopped = generate(f.engine, {prompt}, o)[0];
  EXPECT_EQ(stopped.finish_reason, "stop");
  EXPECT_EQ(stopped.tokens, std::vector<int32_t>(free.tokens.begin(), first + 1));
}

TEST(Generator, TopPDecayNarrowsTheDrawsToTheMostLikelyToken) {
  Fixture f;
  // Hot enough that top_p 0.99 leaves many tokens; decayed to 1e-9 from the second step on,
  // only the most likely one stays: every token after the first is its step's top token.
  GenerateOptions o;
  o.max_tokens = 8;
  o.sampling = {.temperature = 20.0, .top_p = 0.99};
  o.logprobs = true;
  o.top_logprobs = 1;
  int differs_without = 0;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    o.seed = seed;
    o.top_p_decay = 1e-12;
    o.top_p_bound = 1e-9;
    const Generated decayed = generate(f.engine, {{5, 9}}, o)[0];
    for (size_t t = 3; t < decayed.tokens.size(); ++t) {
      EXPECT_EQ(decayed.tokens[t], decayed.top_logprobs[t - 1][0].first) << "seed " << seed << " token " << t;
    }
    o.top_p_decay = 0.0;
    o.top_p_bound = 0.0;
    const Generated free = generate(f.engine, {{5, 9}}, o)[0];
    for (size_t t = 3; t < free.tokens.size(); ++t) differs_without += free.tokens[t] != free.top_logprobs[t - 1][0].first;
  }
  EXPECT_GT(differs_without, 0) << "the test's temperature does not spread the draws";
}

TEST(Generator, RefusesPromptsThatDoNotFit) {
  Fixture f;
  EXPECT_THROW(generate(f.engine, {{}}, greedy(1)), std::invalid_argument);
  EXPECT_THROW(generate(f.engine, {std::vector<int32_t>(16, 1)}, greedy(1)), std::invalid_argument);
  EXPECT_THROW(generate(f.engine, {{64}}, greedy(1)), std::invalid_argument);
}

}  // namespace generator_test
}  // namespace megatron::generate
