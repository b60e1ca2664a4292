// Training a byte-level BPE tokenizer: the byte alphabet, counting words in JSONL, the merge
// loop (by hand, and against a naive trainer), and the GPT-2 files it writes.
#include "data/bpe_trainer.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/bpe_word_counts.hpp"
#include "data/byte_unicode.hpp"
#include "data/gpt2_bpe.hpp"
#include "data/gpt2_bpe_writer.hpp"
#include "support/bytes.hpp"
#include "support/temp_dir.hpp"

namespace megatron::data {
namespace {

using test_support::slurp;
using test_support::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kGpt2Vocab =
    std::string(MEGATRON_SOURCE_DIR) + "/data/tokenizers/gpt2/vocab.json";
const std::string kAusten = std::string(MEGATRON_SOURCE_DIR) + "/data/corpora/austen.jsonl";

BpeVocabulary train(std::vector<WordCount> words, int64_t vocab_size, int64_t min_frequency = 2) {
  return train_bpe(words, {.vocab_size = vocab_size, .min_frequency = min_frequency});
}

// Each merge as "left right", in raw bytes, best first.
std::vector<std::string> merges_of(const BpeVocabulary& v) {
  std::vector<std::string> out;
  for (const BpeMerge& m : v.merges) out.push_back(v.tokens[m.left] + " " + v.tokens[m.right]);
  return out;
}

// The tokens after the 256 bytes, in raw bytes.
std::vector<std::string> learned_of(const BpeVocabulary& v) {
  return {v.tokens.begin() + 256, v.tokens.end()};
}

std::string jsonl(const std::vector<std::string>& texts) {
  std::string out;
  for (const std::string& t : texts) out += nlohmann::json{{"text", t}}.dump() + "\n";
  return out;
}

// The first `n` documents (chapters) of Austen's novels, and their texts.
std::vector<std::string> austen_texts(int n) {
  std::ifstream in(kAusten);
  std::vector<std::string> texts;
  std::string line;
  while (static_cast<int>(texts.size()) < n && std::getline(in, line)) {
    texts.push_back(nlohmann::json::parse(line)["text"].get<std::string>());
  }
  return texts;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "no UserError";
}

// ---------------------------------------------------------------------------------------------
// The byte alphabet

TEST(BpeTrainerAlphabet, SpellsBytesAsGpt2Does) {
  EXPECT_EQ(gpt2_spell_bytes(" the\n"), "\u0120the\u010A");  // "Ġtheċ"
  EXPECT_EQ(gpt2_spell_bytes(std::string(1, '\0')), "\u0100");
  EXPECT_EQ(gpt2_spell_bytes("\xC3\xA9"), "\u00C3\u00A9");  // é's two bytes, each printable
}

TEST(BpeTrainerAlphabet, ByteTokensTakeTheIdsTheyHaveInGpt2sVocabulary) {
  std::ifstream in(kGpt2Vocab);
  const nlohmann::json gpt2 = nlohmann::json::parse(in);
  const BpeVocabulary v = train({}, 300);
  ASSERT_EQ(v.tokens.size(), 256u);
  for (int id = 0; id < 256; ++id) {
    EXPECT_EQ(gpt2.at(gpt2_spell_bytes(v.tokens[id])).get<int>(), id) << "byte token " << id;
  }
}

// ---------------------------------------------------------------------------------------------
// Counting words

TEST(BpeTrainerWordCounts, CountsEachDistinctGpt2PreToken) {
  // "  cat": a run of spaces leaves its last space to the word after it.
  EXPECT_THAT(count_words_in_text("the cat saw the  cat"),
              ElementsAre(WordCount{" ", 1}, WordCount{" cat", 2}, WordCount{" saw", 1},
                          WordCount{" the", 1}, WordCount{"the", 1}));
}

TEST(BpeTrainerWordCounts, CountsTheTextOfEveryDocumentOfEveryInput) {
  TempDir dir;
  const auto a =
      dir.write("a.jsonl", "{\"body\": \"to be\"}\n\n{\"body\": \"or not\", \"id\": 2}\n");
  const auto b = dir.write("b.jsonl", "{\"body\": \"to be\"}\n");
  const WordCountSummary s = count_words({.inputs = {a, b}, .json_key = "body"});
  EXPECT_THAT(s.words, ElementsAre(WordCount{" be", 2}, WordCount{" not", 1}, WordCount{"or", 1},
                                   WordCount{"to", 2}));
  EXPECT_EQ(s.documents, 3);  // the blank line is not a document
  EXPECT_EQ(s.total_words, 6);
}

TEST(BpeTrainerWordCounts, CountsAreTheSameWhateverTheNumberOfWorkers) {
  TempDir dir;
  std::vector<std::string> texts;
  for (int i = 0; i < 300; ++i)
    texts.push_back("w" + std::to_string(i % 17) + " and " + std::to_string(i));
  const auto corpus = dir.write("corpus.jsonl", jsonl(texts));
  // Tiny batches so that four workers really share the lines.
  const auto one = count_words({.inputs = {corpus}, .workers = 1, .batch_bytes = 64});
  const auto four = count_words({.inputs = {corpus}, .workers = 4, .batch_bytes = 64});
  EXPECT_EQ(one.words, four.words);
  EXPECT_EQ(one.documents, 300);
  EXPECT_EQ(four.documents, 300);
}

TEST(BpeTrainerWordCounts, ReportsTheFirstBadLineWithItsFileAndLine) {
  TempDir dir;
  std::string text;
  for (int line = 1; line <= 100; ++line) {
    text += line == 40 ? "not json\n" : line == 70 ? "{\"id\": 1}\n" : "{\"text\": \"ok\"}\n";
  }
  const auto corpus = dir.write("corpus.jsonl", text).string();
  for (const int workers : {1, 4}) {
    EXPECT_EQ(
        error_of([&] { count_words({.inputs = {corpus}, .workers = workers, .batch_bytes = 32}); }),
        corpus + ":40: not a JSON object")
        << workers << " workers";
  }
}

TEST(BpeTrainerWordCounts, ADuplicateKeyCountsTheLastValueAsPythonDoes) {
  TempDir dir;
  const auto corpus = dir.write("corpus.jsonl", "{\"text\": \"first\", \"text\": \"second\"}\n");
  EXPECT_THAT(count_words({.inputs = {corpus}}).words, ElementsAre(WordCount{"second", 1}));
}

TEST(BpeTrainerWordCounts, NamesAMissingKey) {
  TempDir dir;
  const auto corpus = dir.write("corpus.jsonl", "{\"body\": \"x\"}\n").string();
  EXPECT_EQ(error_of([&] { count_words({.inputs = {corpus}}); }), corpus + ":1: no key 'text'");
}

TEST(BpeTrainerWordCounts, RejectsTextThatIsNotAString) {
  TempDir dir;
  const auto corpus = dir.write("corpus.jsonl", "{\"text\": \"x\"}\n{\"text\": 7}\n").string();
  EXPECT_EQ(error_of([&] { count_words({.inputs = {corpus}}); }),
            corpus + ":2: key 'text' is not a string");
}

TEST(BpeTrainerWordCounts, NamesAMissingInput) {
  TempDir dir;
  const auto good = dir.write("good.jsonl", "{\"text\": \"x\"}\n").string();
  const auto missing = (dir.path() / "missing.jsonl").string();
  EXPECT_THAT(error_of([&] { count_words({.inputs = {good, missing}}); }), HasSubstr(missing));
}

// ---------------------------------------------------------------------------------------------
// Learning merges

TEST(BpeTrainer, MergesTheMostFrequentPairFirst) {
  // Pairs in "aaab" x2 and "ab": (a,a) 4, (a,b) 3. After "a a" the words read "aa a b" and
  // "a b": (a,b) 3, (aa,a) 2. After "a b": "aa ab" 2. Then nothing is left to merge.
  const BpeVocabulary v = train({{"aaab", 2}, {"ab", 1}}, 1000);
  EXPECT_THAT(merges_of(v), ElementsAre("a a", "a b", "aa ab"));
  EXPECT_THAT(learned_of(v), ElementsAre("aa", "ab", "aaab"));
}

TEST(BpeTrainer, CountsAPairAsOftenAsItsWordsOccur) {
  // "xy" occurs once in a word seen 5 times; "ab" twice in a word seen twice.
  const BpeVocabulary v = train({{"xy", 5}, {"abab", 2}}, 258);
  EXPECT_THAT(merges_of(v), ElementsAre("x y"));
}

TEST(BpeTrainer, MergesARunOfOneByteLeftToRight) {
  // "aaa" x2 becomes "aa a", so the next pair is (aa, a), not (a, aa).
  const BpeVocabulary v = train({{"aaa", 2}}, 1000);
  EXPECT_THAT(merges_of(v), ElementsAre("a a", "aa a"));
}

TEST(BpeTrainer, BreaksTiesTowardsTheSmallerTokenIdsAsHuggingFaceDoes) {
  // Both pairs occur 3 times. By bytes " a" < "zz", but a space is byte token 220 and "z" is
  // 89 in GPT-2's order, so (z, z) is the smaller pair.
  const BpeVocabulary v = train({{" a", 3}, {"zz", 3}}, 1000);
  EXPECT_THAT(merges_of(v), ElementsAre("z z", "  a"));
}

TEST(BpeTrainer, StopsWhenNoPairOccursMinFrequencyTimes) {
  EXPECT_THAT(merges_of(train({{"ab", 1}, {"cd", 2}}, 1000, 2)), ElementsAre("c d"));
  EXPECT_THAT(merges_of(train({{"ab", 1}, {"cd", 2}}, 1000, 1)), ElementsAre("c d", "a b"));
}

TEST(BpeTrainer, StopsAtTheVocabularySizeCountingEndOfText) {
  EXPECT_EQ(train({{"abcd", 9}}, 257).tokens.size(), 256u);
  EXPECT_EQ(train({{"abcd", 9}}, 258).tokens.size(), 257u);
  EXPECT_EQ(train({{"abcd", 9}}, 259).tokens.size(), 258u);
}

TEST(BpeTrainer, ResultDoesNotDependOnTheOrderOfTheWords) {
  std::vector<WordCount> words = count_words_in_text(austen_texts(1)[0]);
  const BpeVocabulary sorted = train(words, 600);
  std::shuffle(words.begin(), words.end(), std::mt19937(7));
  EXPECT_EQ(train(words, 600), sorted);
}

// The definition, slowly: recount every pair of every word before each merge.
BpeVocabulary naive_train(const std::vector<WordCount>& words, int64_t vocab_size,
                          int64_t min_frequency) {
  BpeVocabulary v;
  std::map<std::string, int32_t> ids;
  std::array<int32_t, 256> byte_id{};
  const auto order = gpt2_byte_order();
  for (int32_t id = 0; id < 256; ++id) {
    v.tokens.emplace_back(1, static_cast<char>(order[id]));
    ids[v.tokens.back()] = id;
    byte_id[order[id]] = id;
  }
  std::vector<std::vector<int32_t>> symbols;
  for (const WordCount& w : words) {
    symbols.emplace_back();
    for (const char c : w.word) symbols.back().push_back(byte_id[static_cast<unsigned char>(c)]);
  }
  while (static_cast<int64_t>(v.tokens.size()) < vocab_size - 1) {
    std::map<std::pair<int32_t, int32_t>, int64_t> counts;  // ordered: the first max is smallest
    for (std::size_t w = 0; w < words.size(); ++w) {
      for (std::size_t i = 0; i + 1 < symbols[w].size(); ++i) {
        counts[{symbols[w][i], symbols[w][i + 1]}] += words[w].count;
      }
    }
    auto best = counts.end();
    for (auto it = counts.begin(); it != counts.end(); ++it) {
      if (best == counts.end() || it->second > best->second) best = it;
    }
    if (best == counts.end() || best->second < min_frequency) break;
    const auto [a, b] = best->first;
    const std::string bytes = v.tokens[a] + v.tokens[b];
    if (!ids.contains(bytes)) {
      ids[bytes] = static_cast<int32_t>(v.tokens.size());
      v.tokens.push_back(bytes);
    }
    const int32_t c = ids[bytes];
    v.merges.push_back({.left = a, .right = b, .result = c});
    for (auto& s : symbols) {
      std::vector<int32_t> out;
      for (std::size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
          out.push_back(c);
          ++i;
        } else {
          out.push_back(s[i]);
        }
      }
      s = std::move(out);
    }
  }
  return v;
}

TEST(BpeTrainer, AgreesWithRecountingEveryPairBeforeEachMerge) {
  std::mt19937 rng(2024);
  for (int trial = 0; trial < 20; ++trial) {
    // Few letters and repeats make many ties, runs like "aaa" and long merge chains.
    std::vector<WordCount> words;
    std::uniform_int_distribution<int> length(1, 12), letter(0, 3), count(1, 6);
    for (int w = 0; w < 60; ++w) {
      std::string word;
      for (int n = length(rng); n > 0; --n) word.push_back(" abc"[letter(rng)]);
      words.push_back({word, count(rng)});
    }
    const int64_t min_frequency = 1 + trial % 3;
    EXPECT_EQ(train(words, 400, min_frequency), naive_train(words, 400, min_frequency))
        << "trial " << trial;
  }
}

TEST(BpeTrainer, RejectsAVocabularyTooSmallForTheBytesAndEndOfText) {
  EXPECT_THAT(error_of([] { train({}, 256); }), HasSubstr("needs at least 257"));
}

TEST(BpeTrainer, RejectsAMinFrequencyBelowOne) {
  EXPECT_THAT(error_of([] { train({}, 300, 0); }), HasSubstr("--min-frequency must be at least 1"));
}

// ---------------------------------------------------------------------------------------------
// The files

TEST(BpeTrainerFiles, WritesGpt2sVocabJsonAndMergesTxt) {
  TempDir dir;
  const Gpt2BpeFiles files =
      write_gpt2_bpe(train({{"aaab", 2}, {"ab", 1}}, 1000), dir.path(), false);
  EXPECT_EQ(files.vocab_size, 260);
  EXPECT_EQ(slurp(files.merges_txt), "#version: 0.2\na a\na b\naa ab\n");
  const nlohmann::json vocab = nlohmann::json::parse(slurp(files.vocab_json));
  EXPECT_EQ(vocab.size(), 260u);
  EXPECT_EQ(vocab.at("!"), 0);
  EXPECT_EQ(vocab.at("aa"), 256);
  EXPECT_EQ(vocab.at("aaab"), 258);
  EXPECT_EQ(vocab.at("<|endoftext|>"), 259);
}

TEST(BpeTrainerFiles, SpellsTokensInTheByteAlphabet) {
  TempDir dir;
  const Gpt2BpeFiles files = write_gpt2_bpe(train({{" t", 2}}, 258), dir.path(), false);
  EXPECT_EQ(slurp(files.merges_txt), "#version: 0.2\n\u0120 t\n");
  EXPECT_EQ(nlohmann::json::parse(slurp(files.vocab_json)).at("\u0120t"), 256);
}

TEST(BpeTrainerFiles, TrainedTokenizerLoadsRoundTripsAndCompressesItsTrainingText) {
  TempDir dir;
  const std::vector<std::string> texts = austen_texts(3);
  const auto corpus = dir.write("austen3.jsonl", jsonl(texts));
  const WordCountSummary counts = count_words({.inputs = {corpus}});
  const Gpt2BpeFiles files = write_gpt2_bpe(train_bpe(counts.words, {.vocab_size = 1000}),
                                            (dir.path() / "tok").string(), false);
  const auto tokenizer = load_gpt2_bpe(files.vocab_json, files.merges_txt);
  EXPECT_EQ(tokenizer->vocab_size(), 1000);
  EXPECT_EQ(tokenizer->special_tokens().eod, 999);
  std::size_t bytes = 0, tokens = 0;
  for (const std::string& text : texts) {
    const std::vector<int32_t> ids = tokenizer->encode(text);
    EXPECT_EQ(tokenizer->decode(ids), text);
    bytes += text.size();
    tokens += ids.size();
  }
  EXPECT_LT(tokens, bytes / 2);  // English with 1000 tokens: over 3 bytes a token
  EXPECT_EQ(tokenizer->encode(" the").size(), 1u);
  EXPECT_EQ(tokenizer->encode(" Emma").size(), 1u);  // the heroine of the first chapters
}

TEST(BpeTrainerFiles, OneOrTwoWorkersWriteTheSameFiles) {
  TempDir dir;
  const auto corpus = dir.write("austen2.jsonl", jsonl(austen_texts(2)));
  std::vector<std::string> written;
  for (const int workers : {1, 2, 2}) {
    const auto counts = count_words({.inputs = {corpus}, .workers = workers, .batch_bytes = 4096});
    const auto out = dir.path() / ("w" + std::to_string(written.size()));
    const Gpt2BpeFiles files =
        write_gpt2_bpe(train_bpe(counts.words, {.vocab_size = 700}), out, false);
    written.push_back(slurp(files.vocab_json) + slurp(files.merges_txt));
  }
  EXPECT_EQ(written[1], written[0]);
  EXPECT_EQ(written[2], written[0]);
}

TEST(BpeTrainerFiles, RefusesToReplaceExistingFilesUnlessAskedTo) {
  TempDir dir;
  dir.write("vocab.json", "{}");
  const BpeVocabulary v = train({{"ab", 2}}, 300);
  EXPECT_THAT(error_of([&] { write_gpt2_bpe(v, dir.path(), false); }),
              HasSubstr("vocab.json' already exists; pass --force"));
  write_gpt2_bpe(v, dir.path(), true);
  EXPECT_EQ(nlohmann::json::parse(slurp(dir.path() / "vocab.json")).size(), 258u);
}

TEST(BpeTrainerFiles, LeavesOnlyTheTwoFilesBehind) {
  TempDir dir;
  write_gpt2_bpe(train({{"ab", 2}}, 300), (dir.path() / "new" / "dir").string(), false);
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path() / "new" / "dir")) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_THAT(names, ElementsAre("merges.txt", "vocab.json"));
}

}  // namespace
}  // namespace megatron::data
