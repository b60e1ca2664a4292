// Sequence-to-sequence fine-tuning data: source/target jsonl read and checked where it enters,
// and each pair laid out as a T5 sample (encoder source + [EOS], decoder [BOS] + target, labels
// target + [EOS]), cut and padded to the two lengths; epochs shuffled from the seed.
#include "data/seq2seq_data.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "core/error.hpp"
#include "data/word_tokenizer.hpp"
#include "support/temp_dir.hpp"
#include "support/user_error.hpp"

namespace megatron::data {
namespace {

const WordTokenizer kWords;  // "w<N>" is token N
constexpr Seq2SeqTokens kIds{.bos = 900, .eos = 901, .pad = 902};

std::string error_of(const std::function<void()>& f) { return test_support::user_error_of(f); }

std::vector<float> mask(std::initializer_list<int> bits) {
  std::vector<float> out;
  for (int b : bits) out.push_back(float(b));
  return out;
}

TEST(Seq2SeqJsonl, EachLineIsASourceAndATarget) {
  test_support::TempDir dir;
  const std::string path = dir.write("s.jsonl",
                                     "{\"source\": \"a b\", \"target\": \"c\"}\n\n"
                                     "{\"target\": \"\", \"source\": \"d\"}\n")
                               .string();
  const std::vector<Seq2SeqPair> pairs = read_seq2seq_jsonl(path);
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[0].source, "a b");
  EXPECT_EQ(pairs[0].target, "c");
  EXPECT_EQ(pairs[1].source, "d");
  EXPECT_EQ(pairs[1].target, "");
  const std::string renamed =
      dir.write("r.jsonl", "{\"document\": \"x\", \"summary\": \"y\"}\n").string();
  EXPECT_EQ(read_seq2seq_jsonl(renamed, {.source = "document", .target = "summary"})[0].target,
            "y");
}

TEST(Seq2SeqJsonl, MalformedInputIsRefusedOnOneLineNamingFileLineAndField) {
  test_support::TempDir dir;
  const auto error = [&](const std::string& text) {
    const std::string path =
        dir.write("bad.jsonl", "{\"source\": \"a\", \"target\": \"b\"}\n" + text).string();
    const std::string message = error_of([&] { read_seq2seq_jsonl(path); });
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_EQ(message.rfind(path + ":", 0), 0u) << message;
    return message.substr(path.size());
  };
  EXPECT_EQ(error("{\"source\": \"a\"}\n"),
            ":2: no field \"target\" (name another with the source and target field options)");
  EXPECT_EQ(error("{\"source\": {\"x\": 1}, \"target\": \"b\"}\n"),
            ":2: field \"source\" is object, not a string");
  EXPECT_EQ(error("{\"source\": \"a\", \"target\": 2.5}\n"),
            ":2: field \"target\" is number, not a string");
  EXPECT_EQ(error("7\n"), ":2: not a JSON object");
  EXPECT_EQ(error("{source: 1}\n").rfind(":2: not JSON (", 0), 0u);
  const std::string empty = dir.write("empty.jsonl", "\n").string();
  EXPECT_EQ(error_of([&] { read_seq2seq_jsonl(empty); }), empty + ": no pairs");
  const std::string missing = (dir.path() / "none.jsonl").string();
  EXPECT_EQ(error_of([&] { read_seq2seq_jsonl(missing); }),
            missing + ": cannot read the seq2seq file");
}

TEST(Seq2SeqSample, SourceEndsInEosTargetIsFedAfterBosAndScoredUpToEos) {
  const Sample s = seq2seq_sample({.source = "w5 w6 w7", .target = "w8 w9"}, kWords, kIds, 6, 5);
  EXPECT_EQ(s.tokens, (std::vector<int32_t>{5, 6, 7, 901, 902, 902}));
  EXPECT_EQ(s.valid_length, 4);
  EXPECT_EQ(s.position_ids, (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(s.decoder_tokens, (std::vector<int32_t>{900, 8, 9, 902, 902}));
  EXPECT_EQ(s.labels, (std::vector<int32_t>{8, 9, 901, 0, 0}));
  EXPECT_EQ(s.loss_mask, mask({1, 1, 1, 0, 0}));
  EXPECT_TRUE(s.document_starts.empty());
  EXPECT_TRUE(s.token_types.empty());
  EXPECT_EQ(s.sentence_order, -1);
  // An empty pair: the encoder reads [EOS], the decoder learns to stop at once.
  const Sample e = seq2seq_sample({}, kWords, kIds, 2, 2);
  EXPECT_EQ(e.tokens, (std::vector<int32_t>{901, 902}));
  EXPECT_EQ(e.valid_length, 1);
  EXPECT_EQ(e.decoder_tokens, (std::vector<int32_t>{900, 902}));
  EXPECT_EQ(e.labels, (std::vector<int32_t>{901, 0}));
  EXPECT_EQ(e.loss_mask, mask({1, 0}));
}

TEST(Seq2SeqSample, LongSourcesKeepTheirFinalEosAndLongTargetsAreCutToTheDecoder) {
  const Sample s = seq2seq_sample({.source = "w1 w2 w3 w4 w5 w6", .target = "w1 w2 w3 w4 w5"},
                                  kWords, kIds, 4, 3);
  EXPECT_EQ(s.tokens, (std::vector<int32_t>{1, 2, 3, 901}));
  EXPECT_EQ(s.valid_length, 4);
  EXPECT_EQ(s.decoder_tokens, (std::vector<int32_t>{900, 1, 2}));
  EXPECT_EQ(s.labels, (std::vector<int32_t>{1, 2, 3}));  // cut: no [EOS]
  EXPECT_EQ(s.loss_mask, mask({1, 1, 1}));
  // Exactly fitting: source ids + [EOS] = S, target ids + [EOS] = Sd.
  const Sample fit = seq2seq_sample({.source = "w1 w2 w3", .target = "w4 w5"}, kWords, kIds, 4, 3);
  EXPECT_EQ(fit.tokens, (std::vector<int32_t>{1, 2, 3, 901}));
  EXPECT_EQ(fit.decoder_tokens, (std::vector<int32_t>{900, 4, 5}));
  EXPECT_EQ(fit.labels, (std::vector<int32_t>{4, 5, 901}));
  EXPECT_EQ(error_of([] { seq2seq_sample({}, kWords, kIds, 0, 3); }),
            "seq2seq encoder length 0 (data.seq_length) is outside 1..2^30");
  EXPECT_EQ(error_of([] { seq2seq_sample({}, kWords, kIds, 3, 0); }),
            "seq2seq decoder length 0 (data.decoder_seq_length) is outside 1..2^30");
}

std::vector<Seq2SeqPair> numbered(int n) {
  std::vector<Seq2SeqPair> out;
  for (int k = 0; k < n; ++k)
    out.push_back({"w" + std::to_string(100 + k), "w" + std::to_string(200 + k)});
  return out;
}

TEST(Seq2SeqSource, CountsCutSourcesAndTargetsAndServesThePairsLaidOut) {
  const std::vector<Seq2SeqPair> pairs = {{"w1 w2 w3", "w4"},     // source + [EOS] = 4 > 3: cut
                                          {"w1 w2", "w4 w5 w6"},  // target + [EOS] = 4 > 3: cut
                                          {"w1 w2 w3 w4", "w5 w6 w7"},  // both
                                          {"w1", "w2 w3"}};             // fits exactly
  const Seq2SeqSource source(pairs, kWords, kIds, 3, 3, 1, 4, /*shuffle=*/false);
  EXPECT_EQ(source.stats().pairs, 4);
  EXPECT_EQ(source.stats().cut_sources, 2);
  EXPECT_EQ(source.stats().cut_targets, 2);
  for (int64_t i = 0; i < 4; ++i) {
    const Sample a = source.sample(i), b = seq2seq_sample(pairs[size_t(i)], kWords, kIds, 3, 3);
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(a.valid_length, b.valid_length);
    EXPECT_EQ(a.decoder_tokens, b.decoder_tokens);
    EXPECT_EQ(a.labels, b.labels);
    EXPECT_EQ(a.loss_mask, b.loss_mask);
  }
  EXPECT_EQ(error_of([] { Seq2SeqSource({}, kWords, kIds, 3, 3, 1, 4, false); }),
            "seq2seq data has no pairs");
}

TEST(Seq2SeqSource, EachEpochIsAPermutationFromTheSeedAndSampleIIsPure) {
  const int n = 9;
  const Seq2SeqSource source(numbered(n), kWords, kIds, 4, 4, 11, 20, /*shuffle=*/true);
  std::vector<int64_t> order;
  for (int64_t i = 0; i < source.size(); ++i) order.push_back(source.pair_of(i));
  const std::set<int64_t> epoch0(order.begin(), order.begin() + n),
      epoch1(order.begin() + n, order.begin() + 2 * n);
  EXPECT_EQ(epoch0.size(), size_t(n));
  EXPECT_EQ(epoch1.size(), size_t(n));
  EXPECT_NE(std::vector<int64_t>(order.begin(), order.begin() + n),
            std::vector<int64_t>(order.begin() + n, order.begin() + 2 * n));
  const Seq2SeqSource again(numbered(n), kWords, kIds, 4, 4, 11, 20, true);
  const Seq2SeqSource other_seed(numbered(n), kWords, kIds, 4, 4, 12, 20, true);
  bool differs = false;
  for (int64_t i = 0; i < 20; ++i) {
    EXPECT_EQ(again.pair_of(i), order[size_t(i)]);
    differs |= other_seed.pair_of(i) != order[size_t(i)];
    EXPECT_EQ(source.sample(i).tokens[0], 100 + order[size_t(i)]);
    EXPECT_EQ(source.sample(i).labels[0], 200 + order[size_t(i)]);
  }
  EXPECT_TRUE(differs);
  const Seq2SeqSource in_order(numbered(n), kWords, kIds, 4, 4, 11, 20, false);
  for (int64_t i = 0; i < 20; ++i) EXPECT_EQ(in_order.pair_of(i), i % n);
  EXPECT_THROW(source.pair_of(20), std::out_of_range);
}

}  // namespace
}  // namespace megatron::data
