// Continuous batching on a small random GPT with rotary positions: requests that join and leave
// the running batch at any step generate what the static loop generates for them (greedy tokens
// equal, log-probabilities within f32 reduction order), long prompts are read in chunks while
// other sequences keep decoding, sampling depends only on a request's own seed, requests wait
// for key/value blocks in arrival order, and a cancelled request gives its blocks back.
#include "generate/batch_engine.hpp"

#include <gtest/gtest.h>

#include <map>

#include "generate/tiny_gpt.hpp"

namespace megatron::generate {
namespace batch_engine_test {

// The model of every test here (tiny_gpt.hpp), with 32 positions.
struct Fixture : megatron::test_support::TinyGpt {
  Fixture() : TinyGpt(32) {}
};

GenerateOptions greedy(int64_t tokens) {
  GenerateOptions o;
  o.max_tokens = tokens;
  o.sampling.top_k = 1;
  return o;
}

// Steps until idle, adding requests[k] before step at[k]; the results by request id.
std::map<int64_t, std::vector<Generated>> run(BatchEngine& engine, std::vector<BatchRequest> requests,
                                              const std::vector<int>& at) {
  std::map<int64_t, std::vector<Generated>> out;
  for (int step = 0; step < 1000; ++step) {
    for (size_t k = 0; k < requests.size(); ++k) {
      if (at[k] == step) engine.add(int64_t(k), requests[k]);
    }
    for (Finished& f : engine.step()) out[f.id] = std::move(f.results);
    if (engine.idle() && step > *std::max_element(at.begin(), at.end())) break;
  }
  return out;
}

const std::vector<std::vector<std::vector<int32_t>>> kPrompts = {
    {{5, 9, 13, 2, 7}, {40}, {3, 3, 8}}, {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}}, {{60, 61}}};

TEST(BatchEngine, RequestsJoiningAtAnyStepGenerateWhatTheStaticLoopGenerates) {
  Fixture f;
  BatchEngine engine(f.engine, {.block_size = 4, .blocks = 64, .max_sequences = 8, .step_tokens = 64});
  std::vector<BatchRequest> requests;
  for (const auto& prompts : kPrompts) requests.push_back({.prompts = prompts, .options = greedy(9)});
  requests[1].options.logprobs = true;
  requests[1].options.top_logprobs = 2;
  const auto got = run(engine, requests, {0, 2, 5});
  ASSERT_EQ(got.size(), 3u);
  for (size_t k = 0; k < requests.size(); ++k) {
    const auto expected = generate(f.engine, requests[k].prompts, requests[k].options);
    ASSERT_EQ(got.at(int64_t(k)).size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      const Generated& g = got.at(int64_t(k))[i];
      EXPECT_EQ(g.tokens, expected[i].tokens) << k << "/" << i;
      EXPECT_EQ(g.text, expected[i].text);
      EXPECT_EQ(g.finish_reason, expected[i].finish_reason);
      ASSERT_EQ(g.logprobs.size(), expected[i].logprobs.size());
      for (size_t t = 0; t < g.logprobs.size(); ++t) {
        EXPECT_NEAR(g.logprobs[t], expected[i].logprobs[t], 1e-5) << t;  // f32 sums in another order
      }
      ASSERT_EQ(g.top_logprobs.size(), expected[i].top_logprobs.size());
      for (size_t t = 0; t < g.top_logprobs.size(); ++t) {
        EXPECT_EQ(g.top_logprobs[t][0].first, expected[i].top_logprobs[t][0].first);
      }
    }
  }
  EXPECT_EQ(engine.blocks_used(), 0);
}

TEST(BatchEngine, LongPromptsAreReadInChunksWhileOtherSequencesKeepDecoding) {
  Fixture f;
  BatchEngine engine(f.engine, {.block_size = 4, .blocks = 64, .max_sequences = 8, .step_tokens = 4});
  std::vector<int> grew;  // the short request's text growth per step
  BatchRequest shorter{.prompts = {{7}}, .options = greedy(12)};
  int64_t texts = 0;
  shorter.on_text = [&](size_t, const std::string&) { ++texts; };
  engine.add(0, shorter);
  engine.step();  // its first token
  std::vector<int32_t> long_prompt(20);
  for (size_t i = 0; i < long_prompt.size(); ++i) long_prompt[i] = int32_t(i + 20);
  engine.add(1, {.prompts = {long_prompt}, .options = greedy(3)});
  std::map<int64_t, std::vector<Generated>> got;
  for (int step = 0; step < 6; ++step) {
    const int64_t before = texts;
    for (Finished& r : engine.step()) got[r.id] = std::move(r.results);
    grew.push_back(int(texts - before));
  }
  // 20 prompt tokens in steps of 4 rows, one of which is the short sequence's: 7 steps to read,
  // and the short sequence chose a token in every one of them.
  EXPECT_EQ(grew, std::vector<int>(6, 1));
  while (!engine.idle()) {
    for (Finished& r : engine.step()) got[r.id] = std::move(r.results);
  }
  EXPECT_EQ(got.at(1)[0].tokens, generate(f.engine, {long_prompt}, greedy(3))[0].tokens);
  EXPECT_EQ(got.at(0)[0].tokens, generate(f.engine, {{7}}, greedy(12))[0].tokens);
}

TEST(BatchEngine, ASampledSequenceDependsOnlyOnItsRequestsSeed) {
  Fixture f;
  GenerateOptions sampled;
  sampled.max_tokens = 10;
  sampled.seed = 7;
  const BatchRequest request{.prompts = {{4, 8}, {4, 8}}, .options = sampled};
  BatchEngine alone(f.engine, {.block_size = 4, .blocks = 64});
  const auto a = run(alone, {request}, {0}).at(0);
  BatchEngine crowded(f.engine, {.block_size = 4, .blocks = 64});
  GenerateOptions other = sampled;
  other.seed = 99;
  const auto b = run(crowded, {{.prompts = {{9, 9, 9}}, .options = other}, request}, {0, 3}).at(1);
  EXPECT_EQ(a[0].tokens, b[0].tokens);
  EXPECT_EQ(a[1].tokens, b[1].tokens);
  EXPECT_NE(a[0].tokens, a[1].tokens) << "the sequences of a request share a generator";
}

TEST(BatchEngine, RequestsWaitForBlocksAndStartInArrivalOrder) {
  Fixture f;
  // 8 positions (2 blocks) per request; the pool holds one request at a time.
  BatchEngine engine(f.engine, {.block_size = 4, .blocks = 3});
  engine.add(0, {.prompts = {{1, 2}}, .options = greedy(6)});
  engine.add(1, {.prompts = {{3, 4}}, .options = greedy(6)});
  engine.step();
  EXPECT_EQ(engine.running(), 1);
  EXPECT_EQ(engine.waiting(), 1);
  EXPECT_EQ(engine.blocks_used(), 2);
  std::vector<int64_t> order;
  while (!engine.idle()) {
    for (Finished& r : engine.step()) order.push_back(r.id);
  }
  EXPECT_EQ(order, (std::vector<int64_t>{0, 1}));
  EXPECT_THROW(engine.add(2, {.prompts = {{1}}, .options = greedy(20)}), std::invalid_argument);
}

TEST(BatchEngine, ACancelledRequestEndsAtOnceAndGivesItsBlocksBack) {
  Fixture f;
  BatchEngine engine(f.engine, {.block_size = 4, .blocks = 16});
  engine.add(5, {.prompts = {{1, 2}, {3}}, .options = greedy(20)});
  engine.add(6, {.prompts = {{4}}, .options = greedy(20)});
  engine.step();
  engine.step();
  engine.cancel(5);
  const auto ended = engine.step();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].id, 5);
  for (const Generated& g : ended[0].results) EXPECT_EQ(g.finish_reason, "cancelled");
  EXPECT_EQ(engine.running(), 1);
  EXPECT_EQ(engine.blocks_used(), 6);  // request 6's 21 positions
}

}  // namespace batch_engine_test
}  // namespace megatron::generate
