// Supervised fine-tuning data: prompt/response and chat jsonl read and checked where they enter,
// chat templates rendered with the assistant turns scored, examples tokenised with exact scored
// boundaries, and samples laid out one example each or packed, with the loss, positions and
// attention segments never crossing examples.
#include "data/sft_data.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <set>

#include "core/error.hpp"
#include "data/classification_data.hpp"
#include "data/word_tokenizer.hpp"
#include "support/temp_dir.hpp"
#include "support/user_error.hpp"

namespace megatron::data {
namespace sft_data_test {

const WordTokenizer kWords;  // "w<N>" is token N; token 0 is the end of a document

const Tokenizer& gpt2() {
  static const std::unique_ptr<Tokenizer> t = make_tokenizer(
      data::TokenizerKind::Gpt2Bpe,
      {.vocab_file = std::string(MEGATRON_SOURCE_DIR) + "/data/tokenizers/gpt2/vocab.json",
       .merge_file = std::string(MEGATRON_SOURCE_DIR) + "/data/tokenizers/gpt2/merges.txt"});
  return *t;
}

std::string error_of(const std::function<void()>& f) { return test_support::user_error_of(f); }

SftExample pair(const std::string& prompt, const std::string& response) {
  return {.segments = {{.text = prompt, .scored = false}, {.text = response, .scored = true}}};
}

TokenizedExample words(const std::string& prompt, const std::string& response) {
  return tokenize_example(pair(prompt, response), kWords, 0);
}

bool same(const std::vector<SftSegment>& a, const std::vector<SftSegment>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].text != b[i].text || a[i].scored != b[i].scored) return false;
  return true;
}

std::string show(const std::vector<SftSegment>& segments) {
  std::string out;
  for (const SftSegment& s : segments) out += (s.scored ? "[scored]" : "[prompt]") + s.text + "|";
  return out;
}

// The decoded text of each run of consecutive scored tokens.
std::vector<std::string> scored_runs(const TokenizedExample& e, const Tokenizer& tokenizer) {
  std::vector<std::string> runs;
  std::vector<int32_t> run;
  for (size_t t = 0; t <= e.tokens.size(); ++t) {
    if (t < e.tokens.size() && e.scored[t]) {
      run.push_back(e.tokens[t]);
    } else if (!run.empty()) {
      runs.push_back(tokenizer.decode(run));
      run.clear();
    }
  }
  return runs;
}

std::vector<float> mask(std::initializer_list<int> bits) {
  std::vector<float> out;
  for (int b : bits) out.push_back(float(b));
  return out;
}

TEST(PromptResponseJsonl, EachLineIsAnUnscoredPromptThenAScoredResponse) {
  test_support::TempDir dir;
  const std::string path = dir.write("sft.jsonl",
                                     "{\"prompt\": \"Q1\", \"response\": \"A1\"}\n\n"
                                     "{\"prompt\": \"\", \"response\": \"A2\", \"x\": 3}\n")
                               .string();
  const std::vector<SftExample> examples = read_prompt_response_jsonl(path);
  ASSERT_EQ(examples.size(), 2u);
  EXPECT_TRUE(same(examples[0].segments, pair("Q1", "A1").segments)) << show(examples[0].segments);
  EXPECT_TRUE(same(examples[1].segments, pair("", "A2").segments)) << show(examples[1].segments);
  const std::string renamed =
      dir.write("r.jsonl", "{\"question\": \"Q\", \"answer\": \"A\"}\n").string();
  const std::vector<SftExample> other =
      read_prompt_response_jsonl(renamed, {.prompt = "question", .response = "answer"});
  EXPECT_TRUE(same(other[0].segments, pair("Q", "A").segments));
}

TEST(PromptResponseJsonl, MalformedInputIsRefusedOnOneLineNamingFileLineAndField) {
  test_support::TempDir dir;
  const auto error = [&](const std::string& text) {
    const std::string path =
        dir.write("bad.jsonl", "{\"prompt\": \"Q\", \"response\": \"A\"}\n" + text).string();
    const std::string message = error_of([&] { read_prompt_response_jsonl(path); });
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_EQ(message.rfind(path + ":", 0), 0u) << message;
    return message.substr(path.size());
  };
  EXPECT_EQ(error("{\"prompt\": \"Q\"}\n"),
            ":2: no field \"response\" (name another with the prompt and response field options)");
  EXPECT_EQ(error("{\"prompt\": 3, \"response\": \"A\"}\n"),
            ":2: field \"prompt\" is number, not a string");
  EXPECT_EQ(error("{\"prompt\": \"Q\", \"response\": [\"A\"]}\n"),
            ":2: field \"response\" is array, not a string");
  EXPECT_EQ(error("[1, 2]\n"), ":2: not a JSON object");
  EXPECT_EQ(error("{\"prompt\": \n").rfind(":2: not JSON (", 0), 0u);
  const std::string empty = dir.write("empty.jsonl", "\n  \n").string();
  EXPECT_EQ(error_of([&] { read_prompt_response_jsonl(empty); }), empty + ": no examples");
  const std::string missing = (dir.path() / "missing.jsonl").string();
  EXPECT_EQ(error_of([&] { read_prompt_response_jsonl(missing); }),
            missing + ": cannot read the fine-tuning file");
}

TEST(ChatTemplate, ChatMlScoresEachAssistantContentAndItsEndMarkerOnly) {
  test_support::TempDir dir;
  const std::string path = dir.write("chat.jsonl",
                                     "{\"messages\": [{\"role\": \"system\", \"content\": \"Be "
                                     "brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"},"
                                     " {\"role\": \"assistant\", \"content\": \"Hello\"}, "
                                     "{\"role\": \"user\", \"content\": \"Bye\"},"
                                     " {\"role\": \"assistant\", \"content\": \"Ciao\"}]}\n")
                               .string();
  const std::vector<SftExample> examples = read_chat_jsonl(path, {}, ChatTemplate::ChatMl);
  ASSERT_EQ(examples.size(), 1u);
  const std::vector<SftSegment> expected = {
      {"<|im_start|>system\nBe "
       "brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
       false},
      {"Hello<|im_end|>", true},
      {"\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n", false},
      {"Ciao<|im_end|>", true},
      {"\n", false}};
  EXPECT_TRUE(same(examples[0].segments, expected)) << show(examples[0].segments);
}

TEST(ChatTemplate, PlainPrefixesEachTurnWithItsRoleAndScoresTheAssistantLines) {
  const std::vector<ChatMessage> messages = {{ChatRole::System, "Be brief."},
                                             {ChatRole::User, "Hi"},
                                             {ChatRole::Assistant, "Hello"},
                                             {ChatRole::User, "Bye"},
                                             {ChatRole::Assistant, "Ciao"}};
  const SftExample e = render_chat(messages, ChatTemplate::Plain);
  const std::vector<SftSegment> expected = {{"System: Be brief.\nUser: Hi\nAssistant: ", false},
                                            {"Hello\n", true},
                                            {"User: Bye\nAssistant: ", false},
                                            {"Ciao\n", true}};
  EXPECT_TRUE(same(e.segments, expected)) << show(e.segments);
}

TEST(ChatTemplate, EveryAssistantTurnOfAMultiTurnChatIsScoredAndNothingElse) {
  const std::vector<ChatMessage> messages = {{ChatRole::User, "What is two and two?"},
                                             {ChatRole::Assistant, "Four."},
                                             {ChatRole::User, "And three and three?"},
                                             {ChatRole::Assistant, "Six, I think."}};
  const int32_t eod = *gpt2().special_tokens().eod;
  const TokenizedExample chatml =
      tokenize_example(render_chat(messages, ChatTemplate::ChatMl), gpt2(), eod);
  EXPECT_EQ(
      scored_runs(chatml, gpt2()),
      (std::vector<std::string>{"Four.<|im_end|>", "Six, I think.<|im_end|>", "<|endoftext|>"}));
  EXPECT_EQ(
      gpt2().decode(chatml.tokens),
      "<|im_start|>user\nWhat is two and two?<|im_end|>\n<|im_start|>assistant\nFour.<|im_end|>\n"
      "<|im_start|>user\nAnd three and three?<|im_end|>\n<|im_start|>assistant\nSix, I "
      "think.<|im_end|>\n"
      "<|endoftext|>");
  const TokenizedExample plain =
      tokenize_example(render_chat(messages, ChatTemplate::Plain), gpt2(), eod);
  EXPECT_EQ(scored_runs(plain, gpt2()),
            (std::vector<std::string>{"Four.\n", "Six, I think.\n<|endoftext|>"}));
}

TEST(ChatJsonl, MalformedChatsAreRefusedOnOneLineNamingFileLineAndField) {
  test_support::TempDir dir;
  const std::string good =
      "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, "
      "{\"role\": \"assistant\", \"content\": \"Hello\"}]}\n";
  const auto error = [&](const std::string& text) {
    const std::string path = dir.write("bad.jsonl", good + "\n" + text).string();
    const std::string message = error_of([&] { read_chat_jsonl(path, {}, ChatTemplate::ChatMl); });
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_EQ(message.rfind(path + ":", 0), 0u) << message;
    return message.substr(path.size());
  };
  EXPECT_EQ(error("{\"turns\": []}"),
            ":3: no field \"messages\" (name another with the messages field option)");
  EXPECT_EQ(error("{\"messages\": \"Hi\"}"),
            ":3: field \"messages\" is string, not an array of messages");
  EXPECT_EQ(error("{\"messages\": []}"), ":3: field \"messages\" is an empty array");
  EXPECT_EQ(error("{\"messages\": [{\"role\": \"assistant\", \"content\": \"a\"}, \"Hi\"]}"),
            ":3: field \"messages[1]\" is string, not an object with a role and a content");
  EXPECT_EQ(error("{\"messages\": [{\"content\": \"Hi\"}]}"),
            ":3: no field \"messages[0].role\" (each message holds a role and a content)");
  EXPECT_EQ(error("{\"messages\": [{\"role\": \"user\"}]}"),
            ":3: no field \"messages[0].content\" (each message holds a role and a content)");
  EXPECT_EQ(error("{\"messages\": [{\"role\": 1, \"content\": \"Hi\"}]}"),
            ":3: field \"messages[0].role\" is number, not a string");
  EXPECT_EQ(error("{\"messages\": [{\"role\": \"assistant\", \"content\": null}]}"),
            ":3: field \"messages[0].content\" is null, not a string");
  EXPECT_EQ(error("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"bot\", "
                  "\"content\": \"b\"}]}"),
            ":3: field \"messages[1].role\" = \"bot\" is not system, user or assistant");
  EXPECT_EQ(error("{\"messages\": [{\"role\": \"system\", \"content\": \"a\"}, {\"role\": "
                  "\"user\", \"content\": \"b\"}]}"),
            ":3: field \"messages\" has no assistant turn: nothing to learn from");
  EXPECT_EQ(error("\"just text\""), ":3: not a JSON object");
  const std::string renamed =
      dir.write("r.jsonl", "{\"conversation\": [{\"role\": \"assistant\", \"content\": \"x\"}]}\n")
          .string();
  EXPECT_EQ(read_chat_jsonl(renamed, {.messages = "conversation"}, ChatTemplate::Plain).size(), 1u);
  const std::string empty = dir.write("empty.jsonl", "").string();
  EXPECT_EQ(error_of([&] { read_chat_jsonl(empty, {}, ChatTemplate::Plain); }),
            empty + ": no examples");
}

TEST(TokenizeExample, SegmentsAreEncodedApartAndTheScoredEndOfDocumentCloses) {
  const TokenizedExample e = words("w5 w6", "w7 w8");
  EXPECT_EQ(e.tokens, (std::vector<int32_t>{5, 6, 7, 8, 0}));
  EXPECT_EQ(e.scored, (std::vector<bool>{false, false, true, true, true}));
  // Encoded together, "a" and "b" could merge into one token straddling the boundary; apart,
  // the scored boundary is exactly where the segments meet.
  const TokenizedExample joined = tokenize_example(pair("a", "b"), gpt2(), 7);
  EXPECT_EQ(joined.tokens, (std::vector<int32_t>{gpt2().encode("a")[0], gpt2().encode("b")[0], 7}));
  EXPECT_EQ(joined.scored, (std::vector<bool>{false, true, true}));
}

TEST(SftSource, WithoutPackingEachExampleIsOneSampleScoredOnItsResponseAndEndPaddedWithEod) {
  std::vector<TokenizedExample> examples = {words("w5 w6", "w7 w8"), words("w9", "w10")};
  const SftSource source(examples, 8, /*pack=*/false, 1, 2, /*shuffle=*/false, 0);
  ASSERT_EQ(source.samples_per_epoch(), 2);
  const Sample s = source.sample(0);
  EXPECT_EQ(s.tokens, (std::vector<int32_t>{5, 6, 7, 8, 0, 0, 0, 0}));
  EXPECT_EQ(s.labels, (std::vector<int32_t>{6, 7, 8, 0, 0, 0, 0, 0}));
  EXPECT_EQ(s.loss_mask, mask({0, 1, 1, 1, 0, 0, 0, 0}));  // w7, w8 and the end; never padding
  EXPECT_EQ(s.position_ids, (std::vector<int32_t>{0, 1, 2, 3, 4, 0, 1, 2}));
  EXPECT_TRUE(s.document_starts.empty());  // plain causal attention
  const Sample t = source.sample(1);
  EXPECT_EQ(t.tokens, (std::vector<int32_t>{9, 10, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(t.loss_mask, mask({1, 1, 0, 0, 0, 0, 0, 0}));
}

TEST(SftSource, PackingFillsWindowsInOrderAndKeepsLossPositionsAndAttentionWithinEachExample) {
  // A: 5 6 | 0, B: 7 8 9 | 0, C: 10 11 12 | 0 (prompt | response + end), S = 8: A and B share a
  // window of 9; C does not fit in the 2 positions left and starts the next.
  const std::vector<TokenizedExample> examples = {words("w5", "w6"), words("w7 w8", "w9"),
                                                  words("w10", "w11 w12")};
  const SftSource source(examples, 8, /*pack=*/true, 1, 2, /*shuffle=*/false, 0);
  ASSERT_EQ(source.samples_per_epoch(), 2);
  EXPECT_EQ(std::vector<int32_t>(source.examples_of(0).begin(), source.examples_of(0).end()),
            (std::vector<int32_t>{0, 1}));
  const Sample s = source.sample(0);
  EXPECT_EQ(s.tokens, (std::vector<int32_t>{5, 6, 0, 7, 8, 9, 0, 0}));
  EXPECT_EQ(s.labels, (std::vector<int32_t>{6, 0, 7, 8, 9, 0, 0, 0}));
  // Not at 2 (A's end predicting B's first token) nor 6 (B's end predicting the padding).
  EXPECT_EQ(s.loss_mask, mask({1, 1, 0, 0, 1, 1, 0, 0}));
  EXPECT_EQ(s.position_ids, (std::vector<int32_t>{0, 1, 2, 0, 1, 2, 3, 0}));
  EXPECT_EQ(s.document_starts, (std::vector<int32_t>{0, 3, 7}));  // A, B, the padding
  const Sample t = source.sample(1);
  EXPECT_EQ(t.tokens, (std::vector<int32_t>{10, 11, 12, 0, 0, 0, 0, 0}));
  EXPECT_EQ(t.labels, (std::vector<int32_t>{11, 12, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(t.loss_mask, mask({1, 1, 1, 0, 0, 0, 0, 0}));
  EXPECT_EQ(t.position_ids, (std::vector<int32_t>{0, 1, 2, 3, 0, 1, 2, 3}));
  EXPECT_EQ(t.document_starts, (std::vector<int32_t>{0, 4}));
}

TEST(SftSource, AnExampleStartingWithAScoredTokenIsNotPredictedFromTheOneBefore) {
  // B has no prompt: its first token is scored, but nothing in B precedes it.
  const std::vector<TokenizedExample> examples = {words("w5", "w6"), words("", "w7 w8")};
  const Sample s = SftSource(examples, 6, true, 1, 1, false, 0).sample(0);
  EXPECT_EQ(s.tokens, (std::vector<int32_t>{5, 6, 0, 7, 8, 0}));
  EXPECT_EQ(s.labels, (std::vector<int32_t>{6, 0, 7, 8, 0, 0}));
  EXPECT_EQ(s.loss_mask, mask({1, 1, 0, 1, 1, 0}));
  EXPECT_EQ(s.document_starts, (std::vector<int32_t>{0, 3}));
}

TEST(SftSource, APackedWindowFilledExactlyHasNoPaddingSegment) {
  const std::vector<TokenizedExample> examples = {words("w5", "w6"),
                                                  words("w7 w8", "w9")};  // 3 + 4 = S + 1
  const Sample s = SftSource(examples, 6, true, 1, 1, false, 0).sample(0);
  EXPECT_EQ(s.tokens, (std::vector<int32_t>{5, 6, 0, 7, 8, 9}));
  EXPECT_EQ(s.labels, (std::vector<int32_t>{6, 0, 7, 8, 9, 0}));
  EXPECT_EQ(s.loss_mask, mask({1, 1, 0, 0, 1, 1}));
  EXPECT_EQ(s.document_starts, (std::vector<int32_t>{0, 3}));
  // One position short: the padding sits only in the labels' last slot, unscored, no segment.
  const Sample t = SftSource(examples, 7, true, 1, 1, false, 0).sample(0);
  EXPECT_EQ(t.labels, (std::vector<int32_t>{6, 0, 7, 8, 9, 0, 0}));
  EXPECT_EQ(t.loss_mask, mask({1, 1, 0, 0, 1, 1, 0}));
  EXPECT_EQ(t.document_starts, (std::vector<int32_t>{0, 3}));
}

TEST(SftSource, LongExamplesAreCutToTheWindowAndCountedWithThoseLeftUnscored) {
  std::vector<TokenizedExample> examples = {
      words("w1 w2 w3 w4", "w5 w6"),     // 7 tokens: cut to 1 2 3 4 5, w5 still scored
      words("w1 w2 w3 w4 w5 w6", "w7"),  // 8 tokens: cut to the prompt, nothing scored left
      words("w1", "w2"),                 // 3 tokens, untouched
      words("", ""),                     // the end token alone: first in its example, no label
  };
  const SftStats stats = cut_examples(examples, 4);
  EXPECT_EQ(stats.examples, 4);
  EXPECT_EQ(stats.cut, 2);
  EXPECT_EQ(stats.unscored, 2);
  EXPECT_EQ(stats.tokens, 5 + 5 + 3 + 1);
  EXPECT_EQ(stats.scored_tokens, 1 + 0 + 2 + 0);
  EXPECT_EQ(examples[0].tokens, (std::vector<int32_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(examples[0].scored, (std::vector<bool>{false, false, false, false, true}));
  EXPECT_EQ(cut_examples(examples, 4).cut, 0);  // cutting again changes nothing

  const SftSource source({words("w1 w2 w3 w4", "w5 w6"), words("w1", "w2")}, 4, false, 1, 2, false,
                         0);
  EXPECT_EQ(source.stats().cut, 1);
  const Sample s = source.sample(0);
  EXPECT_EQ(s.tokens, (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(s.labels, (std::vector<int32_t>{2, 3, 4, 5}));
  EXPECT_EQ(s.loss_mask, mask({0, 0, 0, 1}));
}

std::vector<TokenizedExample> numbered(int n) {
  std::vector<TokenizedExample> out;
  for (int k = 0; k < n; ++k)
    out.push_back(words("w" + std::to_string(100 + k), "w" + std::to_string(200 + k)));
  return out;
}

std::vector<int32_t> first_examples(const SftSource& source) {
  std::vector<int32_t> out;
  for (int64_t i = 0; i < source.size(); ++i) out.push_back(source.examples_of(i)[0]);
  return out;
}

TEST(SftSource, EachEpochIsADifferentPermutationDrawnFromTheSeedAsClassificationSourceDraws) {
  const int n = 10;
  const SftSource source(numbered(n), 4, false, 7, 25, /*shuffle=*/true, 0);
  EXPECT_EQ(source.size(), 25);
  const std::vector<int32_t> order = first_examples(source);
  const std::vector<int32_t> epoch0(order.begin(), order.begin() + n),
      epoch1(order.begin() + n, order.begin() + 2 * n);
  EXPECT_EQ(std::set<int32_t>(epoch0.begin(), epoch0.end()).size(), size_t(n));
  EXPECT_EQ(std::set<int32_t>(epoch1.begin(), epoch1.end()).size(), size_t(n));
  EXPECT_NE(epoch0, epoch1);
  EXPECT_EQ(first_examples(SftSource(numbered(n), 4, false, 7, 25, true, 0)), order);
  EXPECT_NE(first_examples(SftSource(numbered(n), 4, false, 8, 25, true, 0)), order);
  std::vector<int32_t> in_order(25);
  for (int i = 0; i < 25; ++i) in_order[size_t(i)] = i % n;
  EXPECT_EQ(first_examples(SftSource(numbered(n), 4, false, 7, 25, false, 0)), in_order);

  // The same generator as ClassificationSource: row k reads "w<k>", its GPT sample's first token.
  auto set = std::make_shared<ClassificationSet>();
  for (int k = 0; k < n; ++k) set->rows.push_back({.text_a = "w" + std::to_string(k)});
  set->labels = {"x"};
  const ClassificationSource rows(set, std::make_shared<WordTokenizer>(), 1, false, 7, 25, true);
  for (int64_t i = 0; i < 25; ++i) EXPECT_EQ(rows.sample(i).tokens[0], order[size_t(i)]) << i;
}

TEST(SftSource, PackedEpochsHoldEveryExampleOnceAndFollowEachOther) {
  // Examples of 3 tokens, S = 8: three a window; 10 examples pack into 4 samples an epoch.
  const int n = 10;
  const SftSource source(numbered(n), 8, true, 3, 9, true, 0);
  ASSERT_EQ(source.samples_per_epoch(), 4);
  std::vector<int32_t> epoch0, epoch1;
  for (int64_t i = 0; i < 8; ++i) {
    const std::span<const int32_t> members = source.examples_of(i);
    EXPECT_EQ(members.size(), i % 4 == 3 ? 1u : 3u);
    (i < 4 ? epoch0 : epoch1)
        .insert((i < 4 ? epoch0 : epoch1).end(), members.begin(), members.end());
  }
  EXPECT_EQ(std::set<int32_t>(epoch0.begin(), epoch0.end()).size(), size_t(n));
  EXPECT_EQ(std::set<int32_t>(epoch1.begin(), epoch1.end()).size(), size_t(n));
  EXPECT_NE(epoch0, epoch1);
  EXPECT_EQ(source.examples_of(8).size(), 3u);  // the third epoch's first sample
  EXPECT_THROW(source.examples_of(9), std::out_of_range);
}

TEST(SftSource, SampleIIsAPureFunctionOfI) {
  const SftSource a(numbered(7), 8, true, 5, 20, true, 0);
  const SftSource b(numbered(7), 8, true, 5, 20, true, 0);
  const Sample late = a.sample(13);
  for (int64_t i = 0; i < a.size(); ++i) (void)a.sample(i);
  const Sample again = a.sample(13), other = b.sample(13);
  for (const Sample* s : {&again, &other}) {
    EXPECT_EQ(s->tokens, late.tokens);
    EXPECT_EQ(s->labels, late.labels);
    EXPECT_EQ(s->loss_mask, late.loss_mask);
    EXPECT_EQ(s->position_ids, late.position_ids);
    EXPECT_EQ(s->document_starts, late.document_starts);
  }
}

TEST(SftSource, NoExamplesOrNoSequenceIsRefused) {
  EXPECT_EQ(error_of([] { SftSource({}, 8, false, 1, 1, false, 0); }),
            "fine-tuning data has no examples");
  EXPECT_EQ(error_of([] { SftSource(numbered(1), 0, false, 1, 1, false, 0); }),
            "fine-tuning sequence length 0 (data.seq_length) is below 1");
}

}  // namespace sft_data_test
}  // namespace megatron::data
