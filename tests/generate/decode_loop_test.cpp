// The decode loop that generate and eval share, driven by a scripted stepper whose logits are
// known: how a token is chosen, when a sequence stops, and what the loop asks of a stepper.
#include "generate/decode_loop.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <vector>

namespace megatron::generate {
namespace {

constexpr int64_t kVocab = 8;

// Each step scores every live sequence with row(sequence index, position); it remembers which
// sequences each step was asked about.
struct ScriptedStepper final : Stepper {
  std::function<std::vector<float>(size_t, int64_t)> row;
  std::vector<std::vector<size_t>> asked;

  StepScores step(std::span<const Sequence> sequences, std::span<const size_t> live) override {
    asked.emplace_back(live.begin(), live.end());
    StepScores out;
    for (const size_t i : live) {
      const std::vector<float> r = row(i, sequences[i].position);
      out.logits.insert(out.logits.end(), r.begin(), r.end());
    }
    return out;
  }
};

// A row whose largest logit is at `token`.
std::vector<float> peak_at(int32_t token) {
  std::vector<float> r(kVocab, 0.0f);
  r[size_t(token)] = 5.0f;
  return r;
}

Sequence prompt_of(std::vector<int32_t> tokens) {
  const auto n = int64_t(tokens.size());
  return {.tokens = std::move(tokens), .prompt = n, .position = n};
}

LoopOptions greedy(int64_t max_tokens) {
  return {.max_tokens = max_tokens, .sampling = {.top_k = 1}};
}

TEST(DecodeLoop, GreedyPicksTheFirstMaximalColumn) {
  ScriptedStepper stepper;
  stepper.row = [](size_t, int64_t) { return std::vector<float>{1, 4, 2, 7, 7, 0, 7, 3}; };
  std::vector<Sequence> seqs = {prompt_of({1})};
  decode(stepper, seqs, greedy(1));
  EXPECT_EQ(seqs[0].tokens, (std::vector<int32_t>{1, 3}));
}

TEST(DecodeLoop, MaxTokensEndsASequenceWithLength) {
  ScriptedStepper stepper;
  stepper.row = [](size_t, int64_t position) { return peak_at(int32_t(position)); };
  std::vector<Sequence> seqs = {prompt_of({0, 1})};
  decode(stepper, seqs, greedy(3));
  EXPECT_EQ(seqs[0].tokens, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(seqs[0].finish_reason, "length");
  EXPECT_EQ(stepper.asked.size(), 3u);
}

TEST(DecodeLoop, AStopTokenEndsASequenceAndStaysInIt) {
  ScriptedStepper stepper;
  stepper.row = [](size_t, int64_t position) { return peak_at(int32_t(position)); };
  std::vector<Sequence> seqs = {prompt_of({0})};
  LoopOptions o = greedy(6);
  o.stop_tokens = {3};
  decode(stepper, seqs, o);
  EXPECT_EQ(seqs[0].tokens, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(seqs[0].finish_reason, "stop");
}

TEST(DecodeLoop, AnEndTokenEndsASequenceAndIsLeftOutOfIt) {
  ScriptedStepper stepper;
  stepper.row = [](size_t, int64_t position) { return peak_at(int32_t(position)); };
  std::vector<Sequence> seqs = {prompt_of({0})};
  LoopOptions o = greedy(6);
  o.end_tokens = {3};
  o.logprobs = true;
  decode(stepper, seqs, o);
  EXPECT_EQ(seqs[0].tokens, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(seqs[0].logprobs.size(), 2u);  // 1 and 2; none for the end token
  EXPECT_EQ(seqs[0].finish_reason, "stop");
}

TEST(DecodeLoop, MaxPositionsEndsASequenceWithLength) {
  ScriptedStepper stepper;
  stepper.row = [](size_t, int64_t position) { return peak_at(int32_t(position)); };
  std::vector<Sequence> seqs = {prompt_of({0, 1})};
  LoopOptions o = greedy(10);
  o.max_positions = 4;
  decode(stepper, seqs, o);
  EXPECT_EQ(seqs[0].tokens, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(seqs[0].finish_reason, "length");
}

TEST(DecodeLoop, ZeroMaxTokensChoosesNothing) {
  ScriptedStepper stepper;
  stepper.row = [](size_t, int64_t position) { return peak_at(int32_t(position)); };
  std::vector<Sequence> seqs = {prompt_of({0, 1})};
  decode(stepper, seqs, greedy(0));
  EXPECT_EQ(seqs[0].tokens, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(seqs[0].finish_reason, "length");
}

TEST(DecodeLoop, APromptLongerThanThePositionTakesItsOwnTokensAndScoresThem) {
  ScriptedStepper stepper;
  stepper.row = [](size_t, int64_t) { return peak_at(7); };
  // Megatron's static batch: both start at position 1; the second's prompt runs to position 3.
  std::vector<Sequence> seqs = {prompt_of({4}), prompt_of({4, 5, 6})};
  seqs[1].position = 1;
  LoopOptions o = greedy(2);
  o.logprobs = true;
  decode(stepper, seqs, o);
  EXPECT_EQ(seqs[0].tokens, (std::vector<int32_t>{4, 7, 7}));
  EXPECT_EQ(seqs[1].tokens, (std::vector<int32_t>{4, 5, 6, 7, 7}));
  EXPECT_EQ(seqs[1].logprobs.size(), 4u);               // 5 and 6 given, then two chosen
  EXPECT_LT(seqs[1].logprobs[0], seqs[1].logprobs[2]);  // 5 was unlikely, 7 the peak
}

TEST(DecodeLoop, AFinishedSequenceIsNoLongerAskedAbout) {
  ScriptedStepper stepper;
  stepper.row = [](size_t i, int64_t) { return peak_at(i == 0 ? 3 : 1); };
  std::vector<Sequence> seqs = {prompt_of({0}), prompt_of({0})};
  LoopOptions o = greedy(3);
  o.stop_tokens = {3};
  decode(stepper, seqs, o);
  ASSERT_EQ(stepper.asked.size(), 3u);
  EXPECT_EQ(stepper.asked[0], (std::vector<size_t>{0, 1}));
  EXPECT_EQ(stepper.asked[1], (std::vector<size_t>{1}));
}

TEST(DecodeLoop, ASampledSequencesDrawsDoNotDependOnItsBatch) {
  ScriptedStepper stepper;
  stepper.row = [](size_t, int64_t) { return std::vector<float>(kVocab, 0.0f); };  // uniform
  LoopOptions o{.max_tokens = 12, .seed = 40, .rng_per_sequence = true};
  std::vector<Sequence> batch = {prompt_of({0}), prompt_of({0}), prompt_of({0})};
  decode(stepper, batch, o);
  std::vector<Sequence> alone = {prompt_of({0})};
  o.seed = 42;  // the third of a batch seeded 40
  decode(stepper, alone, o);
  EXPECT_EQ(batch[2].tokens, alone[0].tokens);
  EXPECT_NE(batch[1].tokens, batch[2].tokens);
}

TEST(DecodeLoop, ARankThatDoesNotChooseTakesTheTokensAgreed) {
  // A non-reporting rank: no logits here; agree brings the reporting rank's choice.
  struct Silent final : Stepper {
    StepScores step(std::span<const Sequence>, std::span<const size_t>) override { return {}; }
    void agree(std::span<int32_t> tokens) override {
      for (int32_t& t : tokens) t = 6;
    }
  } stepper;
  std::vector<Sequence> seqs = {prompt_of({0})};
  decode(stepper, seqs, greedy(2));
  EXPECT_EQ(seqs[0].tokens, (std::vector<int32_t>{0, 6, 6}));
}

TEST(DecodeLoop, OnChosenCanStopASequence) {
  ScriptedStepper stepper;
  stepper.row = [](size_t, int64_t position) { return peak_at(int32_t(position)); };
  std::vector<Sequence> seqs = {prompt_of({0})};
  decode(stepper, seqs, greedy(6), [](size_t, const Sequence& s) { return s.tokens.size() == 3; });
  EXPECT_EQ(seqs[0].tokens, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(seqs[0].finish_reason, "stop");
}

}  // namespace
}  // namespace megatron::generate
