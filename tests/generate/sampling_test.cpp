// Megatron's sampling rules (greedy, temperature, top-k, top-p with the first token always kept),
// a seed that reproduces the draws, and the log-probabilities reported with them.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "generate/sampling.hpp"

namespace megatron::generate {
namespace {

// log of probabilities: softmax gives them back exactly enough for counting.
std::vector<float> logits_of(const std::vector<double>& p) {
  std::vector<float> out;
  for (const double x : p) out.push_back(float(std::log(x)));
  return out;
}

std::map<int32_t, int> draws(const std::vector<float>& logits, const Sampling& s, int n, uint64_t seed = 1) {
  Rng rng(seed);
  std::map<int32_t, int> counts;
  for (int i = 0; i < n; ++i) ++counts[sample(logits, s, rng)];
  return counts;
}

TEST(Sampling, TemperatureZeroIsGreedyWhateverTopKAndTopPSay) {
  EXPECT_TRUE(sampling_for(0.0, 0, 0.0).greedy());
  EXPECT_TRUE(sampling_for(0.0, 40, 0.9).greedy());
  const Sampling drawn = sampling_for(0.7, 40, 0.9);
  EXPECT_FALSE(drawn.greedy());
  EXPECT_EQ(drawn.temperature, 0.7);
  EXPECT_EQ(drawn.top_k, 40);
  EXPECT_EQ(drawn.top_p, 0.9);
}

TEST(Sampling, GreedyTakesTheFirstLargestLogit) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  Rng rng(1);
  EXPECT_EQ(sample(logits, {.top_k = 1}, rng), 1);
  EXPECT_EQ(argmax(logits), 1);
}

TEST(Sampling, TopKDrawsOnlyAmongTheKMostLikely) {
  const auto counts = draws(logits_of({0.1, 0.4, 0.05, 0.3, 0.15}), {.top_k = 2}, 2000);
  ASSERT_EQ(counts.size(), 2u);
  EXPECT_TRUE(counts.count(1) && counts.count(3));
  // 0.4 : 0.3 renormalised: 4/7 of the draws, give or take 3.5 standard deviations (0.011 each).
  EXPECT_NEAR(counts.at(1) / 2000.0, 4.0 / 7.0, 0.04);
}

TEST(Sampling, TopPKeepsTokensUntilTheMassBeforeThemExceedsP) {
  // Sorted 0.5, 0.3, 0.2: with p 0.6 the mass before 0.3 is 0.5 (kept), before 0.2 it is 0.8.
  const auto counts = draws(logits_of({0.2, 0.5, 0.3}), {.top_p = 0.6}, 2000);
  ASSERT_EQ(counts.size(), 2u);
  EXPECT_EQ(counts.count(0), 0u);
  EXPECT_NEAR(counts.at(1) / 2000.0, 0.5 / 0.8, 0.04);
}

TEST(Sampling, TopPAlwaysKeepsTheMostLikelyToken) {
  const auto counts = draws(logits_of({0.2, 0.5, 0.3}), {.top_p = 0.01}, 200);
  ASSERT_EQ(counts.size(), 1u);
  EXPECT_EQ(counts.begin()->first, 1);
}

TEST(Sampling, LowTemperatureSharpensAndHighTemperatureFlattens) {
  const std::vector<float> logits = logits_of({0.6, 0.4});
  const double cold = draws(logits, {.temperature = 0.25}, 4000)[0] / 4000.0;
  const double hot = draws(logits, {.temperature = 4.0}, 4000)[0] / 4000.0;
  // 0.6^4 / (0.6^4 + 0.4^4) = 0.835; 0.6^0.25 / (...) = 0.525.
  EXPECT_NEAR(cold, 0.835, 0.03);
  EXPECT_NEAR(hot, 0.525, 0.03);
}

TEST(Sampling, ATemperatureTooSmallForF32ChoosesTheGreedyToken) {
  // Each temperature is accepted (above 0); the largest logit divided by it overflows f32.
  const std::vector<std::vector<float>> rows = {{1.5f, -0.25f, 5.0f, 0.75f, 4.9f, -3.0f},
                                                {-7.0f, -1.0f, -4.0f, -1.5f}};  // all below 0
  for (const std::vector<float>& logits : rows) {
    for (const double t : {1e-46, 1e-38, 1e-300}) {
      for (const Sampling& s : {Sampling{.temperature = t}, Sampling{.temperature = t, .top_k = 3},
                                Sampling{.temperature = t, .top_p = 0.9}}) {
        Rng rng(1);
        for (int i = 0; i < 8; ++i) EXPECT_EQ(sample(logits, s, rng), argmax(logits)) << "temperature " << t;
      }
    }
  }
}

TEST(Sampling, OrdinaryTemperaturesDrawWhatTheyAlwaysDrew) {
  // Recorded before tiny temperatures were made greedy: the same seed, the same tokens.
  const std::vector<float> logits = {1.5f, -0.25f, 2.0f, 0.75f, 1.9f, -3.0f};
  const std::vector<std::pair<Sampling, std::vector<int32_t>>> cases = {
      {{.temperature = 0.7}, {3, 4, 2, 2, 0, 0, 4, 2, 2, 2, 2, 3, 4, 4, 0, 0}},
      {{.temperature = 1.3, .top_k = 3}, {4, 0, 2, 2, 2, 2, 0, 4, 2, 4, 4, 4, 0, 0, 2, 2}},
      {{.temperature = 0.9, .top_p = 0.8}, {4, 0, 2, 2, 2, 2, 0, 4, 2, 4, 4, 4, 0, 4, 2, 2}}};
  for (const auto& [s, expected] : cases) {
    Rng rng(2024);
    std::vector<int32_t> got;
    for (size_t i = 0; i < expected.size(); ++i) got.push_back(sample(logits, s, rng));
    EXPECT_EQ(got, expected) << "temperature " << s.temperature;
  }
}

TEST(Sampling, TheSameSeedDrawsTheSameTokensAndAnotherSeedOthers) {
  const std::vector<float> logits = logits_of({0.2, 0.2, 0.2, 0.2, 0.2});
  std::vector<int32_t> a, b, c;
  Rng ra(42), rb(42), rc(43);
  for (int i = 0; i < 50; ++i) {
    a.push_back(sample(logits, {}, ra));
    b.push_back(sample(logits, {}, rb));
    c.push_back(sample(logits, {}, rc));
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(Sampling, LogProbabilitiesAreTheLogSoftmaxOfTheRawLogits) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  EXPECT_NEAR(log_probability(logits, 0), 1.0 - lse, 1e-12);
  const auto top = top_log_probabilities(logits, 2);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].first, 2);
  EXPECT_EQ(top[1].first, 1);
  EXPECT_NEAR(top[1].second, 2.0 - lse, 1e-12);
}

}  // namespace
}  // namespace megatron::generate
