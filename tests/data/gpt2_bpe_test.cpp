// GPT-2 byte-level BPE: the pre-tokenizer's regex semantics, ids against the golden file and
// tiktoken, exact round trips of arbitrary bytes, thread safety, and errors for bad files.
#include "data/gpt2_bpe.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/printable.hpp"
#include "data/gpt2_pretokenize.hpp"
#include "data/unicode.hpp"

namespace megatron::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kGpt2Dir = std::string(MEGATRON_SOURCE_DIR) + "/data/tokenizers/gpt2";
const std::string kVocab = kGpt2Dir + "/vocab.json";
const std::string kMerges = kGpt2Dir + "/merges.txt";

// Loading takes a moment: share one tokenizer across the tests that use the real files.
const Tokenizer& gpt2() {
  static const std::unique_ptr<Tokenizer> tokenizer = load_gpt2_bpe(kVocab, kMerges);
  return *tokenizer;
}

std::vector<std::string> pretokens(std::string_view text) {
  std::vector<std::string> words;
  for (const std::string_view word : gpt2_pretokenize(text)) words.emplace_back(word);
  return words;
}

std::string utf8(char32_t c) {
  std::string out;
  unicode::append_utf8(out, c);
  return out;
}

// ---------------------------------------------------------------------------------------------
// A deliberately naive reading of the regex, for comparison with the hand-written scanner:
// it tries each alternative in order on decoded code points, and implements \s+(?!\S) by
// literal backtracking.
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+

enum class Class { kLetter, kNumber, kSpace, kOther };

std::vector<std::string> reference_pretokens(std::string_view text) {
  const std::vector<unicode::CodePoint> cps = unicode::decode(text);
  const std::size_t n = cps.size();
  auto cls = [&](std::size_t i) {
    // An invalid byte decodes to U+FFFD of length 1 where U+FFFD itself has 3 bytes.
    const bool invalid = cps[i].value == U'\uFFFD' && cps[i].length == 1;
    if (invalid) return Class::kOther;
    if (unicode::is_whitespace(cps[i].value)) return Class::kSpace;
    if (unicode::is_letter(cps[i].value)) return Class::kLetter;
    if (unicode::is_number(cps[i].value)) return Class::kNumber;
    return Class::kOther;
  };
  auto is = [&](std::size_t i, char32_t c) { return i < n && cps[i].value == c; };
  auto run = [&](std::size_t i, Class c) {
    std::size_t k = 0;
    while (i + k < n && cls(i + k) == c) ++k;
    return k;
  };
  // Each returns the match length in code points, 0 when the alternative fails.
  auto contraction = [&](std::size_t i) -> std::size_t {
    for (const std::u32string_view s : {U"'s", U"'t", U"'re", U"'ve", U"'m", U"'ll", U"'d"}) {
      bool match = true;
      for (std::size_t k = 0; k < s.size(); ++k) match = match && is(i + k, s[k]);
      if (match) return s.size();
    }
    return 0;
  };
  auto optional_space_run = [&](std::size_t i, Class c) -> std::size_t {
    const std::size_t space = is(i, U' ') ? 1 : 0;
    const std::size_t k = run(i + space, c);
    // Without the space the run would have to start at i, which holds the space.
    return k > 0 ? space + k : 0;
  };
  auto space_not_before_nonspace = [&](std::size_t i) -> std::size_t {
    for (std::size_t k = run(i, Class::kSpace); k > 0; --k) {
      if (i + k == n || cls(i + k) == Class::kSpace) return k;
    }
    return 0;
  };

  std::vector<std::string> words;
  for (std::size_t i = 0; i < n;) {
    std::size_t k = contraction(i);
    if (k == 0) k = optional_space_run(i, Class::kLetter);
    if (k == 0) k = optional_space_run(i, Class::kNumber);
    if (k == 0) k = optional_space_run(i, Class::kOther);
    if (k == 0) k = space_not_before_nonspace(i);
    if (k == 0) k = run(i, Class::kSpace);
    const std::size_t begin = cps[i].offset;
    const std::size_t end = i + k < n ? cps[i + k].offset : text.size();
    words.emplace_back(text.substr(begin, end - begin));
    i += k;
  }
  return words;
}

// Random text that exercises every branch of the scanner: several scripts, every kind of
// whitespace in runs, digits, apostrophes and contractions, emoji, and invalid UTF-8.
std::string random_text(std::mt19937& rng, std::size_t pieces) {
  // clang-format off
  static const std::vector<std::string> kFragments = {
      "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'", "\xE2\x80\x99", " ", "  ",
      "\t", "\n", "\r\n", "\n\n", utf8(0xA0), utf8(0x3000), utf8(0x2028), utf8(0x85), "x",
      "the", " the", "Hello", "2024", "3.14", "!!", "...", "--", "\xFF", "\x80", "\xC3",
      "\xE2\x82", "\xF0\x9F\x98", "\xED\xA0\x80" /* surrogate */, "\xC0\xAF" /* overlong */};
  // clang-format on
  // Ranges of code points from several scripts and classes.
  static const std::vector<std::pair<char32_t, char32_t>> kRanges = {
      {0x20, 0x7E},       {0xA1, 0x17F},      {0x300, 0x36F} /* combining marks */,
      {0x391, 0x3C9},     {0x410, 0x44F},     {0x5D0, 0x5EA},
      {0x660, 0x669},     {0x900, 0x97F},     {0x3040, 0x30FF},
      {0x4E00, 0x4FFF},   {0xAC00, 0xAC80},   {0x2000, 0x206F},
      {0x1F300, 0x1F64F}, {0x1F900, 0x1F9FF}, {0xFF10, 0xFF5A}};
  std::string text;
  for (std::size_t p = 0; p < pieces; ++p) {
    if (rng() % 3 == 0) {
      text += kFragments[rng() % kFragments.size()];
    } else {
      const auto [lo, hi] = kRanges[rng() % kRanges.size()];
      const std::size_t length = 1 + rng() % 6;
      for (std::size_t k = 0; k < length; ++k) {
        unicode::append_utf8(text, lo + static_cast<char32_t>(rng() % (hi - lo + 1)));
      }
    }
  }
  return text;
}

// ---------------------------------------------------------------------------------------------
// Pre-tokenizer: the regex's semantics, case by case.

TEST(Gpt2PreTokenize, SpaceJoinsTheWordAfterIt) {
  EXPECT_THAT(pretokens("Hello world"), ElementsAre("Hello", " world"));
}

TEST(Gpt2PreTokenize, WhitespaceRunLeavesItsLastSpaceToTheWordAfterIt) {
  EXPECT_THAT(pretokens("  hello"), ElementsAre(" ", " hello"));
  EXPECT_THAT(pretokens("a   b"), ElementsAre("a", "  ", " b"));
}

TEST(Gpt2PreTokenize, WhitespaceRunAtTheEndIsTakenWhole) {
  EXPECT_THAT(pretokens("hello   "), ElementsAre("hello", "   "));
  EXPECT_THAT(pretokens("x\n\n"), ElementsAre("x", "\n\n"));
}

TEST(Gpt2PreTokenize, SingleNonSpaceWhitespaceBeforeAWordStandsAlone) {
  EXPECT_THAT(pretokens("a\tb"), ElementsAre("a", "\t", "b"));
  EXPECT_THAT(pretokens("a\n\nb"), ElementsAre("a", "\n", "\n", "b"));
}

TEST(Gpt2PreTokenize, RunEndingInASpaceGivesThatSpaceToTheWord) {
  EXPECT_THAT(pretokens(" \n x"), ElementsAre(" \n", " x"));
  EXPECT_THAT(pretokens("  \t x"), ElementsAre("  \t", " x"));
}

TEST(Gpt2PreTokenize, OnlyAsciiSpaceIsTheOptionalLeadingSpace) {
  const std::string nbsp = utf8(0xA0);
  EXPECT_THAT(pretokens("a" + nbsp + "b"), ElementsAre("a", nbsp, "b"));
  EXPECT_THAT(pretokens("a\tb"), ElementsAre("a", "\t", "b"));
}

TEST(Gpt2PreTokenize, ContractionsSplitOffLowercaseOnly) {
  EXPECT_THAT(pretokens("don't"), ElementsAre("don", "'t"));
  EXPECT_THAT(pretokens("we're they've I'm you'll he'd it's"),
              ElementsAre("we", "'re", " they", "'ve", " I", "'m", " you", "'ll", " he", "'d",
                          " it", "'s"));
  EXPECT_THAT(pretokens("DON'T I'LL"), ElementsAre("DON", "'", "T", " I", "'", "LL"));
}

TEST(Gpt2PreTokenize, ContractionNeedsTheAsciiApostrophe) {
  const std::string right_quote = utf8(0x2019);
  EXPECT_THAT(pretokens("don" + right_quote + "t"), ElementsAre("don", right_quote, "t"));
}

TEST(Gpt2PreTokenize, ContractionMatchesBeforeALetterRun) {
  // The regex tries 's before \p{L}+, so "'sup" is "'s" + "up".
  EXPECT_THAT(pretokens("'sup"), ElementsAre("'s", "up"));
  // A space before the apostrophe joins it instead: " ?[^\s\p{L}\p{N}]+".
  EXPECT_THAT(pretokens("a 's"), ElementsAre("a", " '", "s"));
}

TEST(Gpt2PreTokenize, PunctuationRunIncludesApostrophes) {
  EXPECT_THAT(pretokens("x.'s"), ElementsAre("x", ".'", "s"));
  EXPECT_THAT(pretokens("Hello!!! ..."), ElementsAre("Hello", "!!!", " ..."));
}

TEST(Gpt2PreTokenize, DigitsFormOneRunSeparateFromLetters) {
  EXPECT_THAT(pretokens("12345 67x1"), ElementsAre("12345", " 67", "x", "1"));
  // \p{N} is every script's digits.
  EXPECT_THAT(pretokens(utf8(0x661) + utf8(0x662) + "a"),
              ElementsAre(utf8(0x661) + utf8(0x662), "a"));
}

TEST(Gpt2PreTokenize, LettersOfAnyScriptFormOneRun) {
  EXPECT_THAT(pretokens("Привет мир"), ElementsAre("Привет", " мир"));
  EXPECT_THAT(pretokens("日本語です。"), ElementsAre("日本語です", "。"));
  EXPECT_THAT(pretokens("hi 👋👋"), ElementsAre("hi", " 👋👋"));
}

TEST(Gpt2PreTokenize, InvalidBytesAreOtherCharacters) {
  EXPECT_THAT(pretokens("a\xFF\xFE"
                        "b"),
              ElementsAre("a", "\xFF\xFE", "b"));
  EXPECT_THAT(pretokens("a \xC3"), ElementsAre("a", " \xC3"));
  // A truncated sequence is one invalid byte at a time, still one run of "other".
  EXPECT_THAT(pretokens("\xE2\x82!x"), ElementsAre("\xE2\x82!", "x"));
}

TEST(Gpt2PreTokenize, EmptyTextHasNoPreTokens) { EXPECT_TRUE(pretokens("").empty()); }

TEST(Gpt2PreTokenize, AgreesWithANaiveReadingOfTheRegexOnRandomText) {
  std::mt19937 rng(20240611);
  for (int trial = 0; trial < 2000; ++trial) {
    const std::string text = random_text(rng, 1 + rng() % 30);
    ASSERT_EQ(pretokens(text), reference_pretokens(text)) << "text: " << text;
  }
}

// ---------------------------------------------------------------------------------------------
// Encoding: the golden file, and the cases above as ids. Expected ids here were checked with
// tiktoken 0.14.0 (gpt2 ranks built from these vocab.json and merges.txt, disallowed_special=()).

TEST(Gpt2Bpe, MatchesEveryGpt2IdListInTheGoldenFile) {
  std::ifstream in(std::string(MEGATRON_SOURCE_DIR) + "/tests/data/golden/tokenizers.jsonl");
  ASSERT_TRUE(in) << "missing tests/data/golden/tokenizers.jsonl";
  int checked = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto record = nlohmann::json::parse(line);
    const std::string text = record.at("text");
    EXPECT_EQ(gpt2().encode(text), record.at("gpt2").get<std::vector<int32_t>>())
        << "text: " << text;
    ++checked;
  }
  EXPECT_EQ(checked, 48);
}

TEST(Gpt2Bpe, WhitespaceRunBeforeAWordKeepsOneSpaceForIt) {
  EXPECT_THAT(gpt2().encode("  hello"), ElementsAre(220, 23748));  // "Ġ", "Ġhello"
  EXPECT_THAT(gpt2().encode("hello   "), ElementsAre(31373, 220, 220, 220));
  EXPECT_THAT(gpt2().encode("  \t x"), ElementsAre(220, 220, 197, 2124));
}

TEST(Gpt2Bpe, NewlinesBetweenWordsAreSeparateTokens) {
  EXPECT_THAT(gpt2().encode("a\n\nb"), ElementsAre(64, 198, 198, 65));
}

TEST(Gpt2Bpe, ContractionsAreTokensOfTheirOwn) {
  EXPECT_THAT(gpt2().encode("don't"), ElementsAre(9099, 470));
  EXPECT_THAT(gpt2().encode("we're"), ElementsAre(732, 821));
  EXPECT_THAT(gpt2().encode("DON'T"), ElementsAre(41173, 6, 51));
  EXPECT_THAT(gpt2().encode("'sup"), ElementsAre(338, 929));
}

TEST(Gpt2Bpe, DigitRunsAreSplitOnlyByMerges) {
  EXPECT_THAT(gpt2().encode("12345 67"), ElementsAre(10163, 2231, 8275));  // 123 45 Ġ67
}

TEST(Gpt2Bpe, RepeatedLettersMergeLeftToRight) {
  EXPECT_THAT(gpt2().encode("aaaaaaaaaaaaaaaaaaaa"),
              ElementsAre(24794, 24794, 24794, 24794, 24794));
}

TEST(Gpt2Bpe, MultiByteCharactersSplitAtByteLevel) {
  EXPECT_THAT(gpt2().encode("hi 👋👋"), ElementsAre(5303, 50169, 233, 41840, 233));
  EXPECT_THAT(gpt2().encode("日本語です"),
              ElementsAre(33768, 98, 17312, 105, 45739, 252, 30640, 33623));
}

TEST(Gpt2Bpe, SpecialTokenTextIsOrdinaryText) {
  EXPECT_THAT(gpt2().encode("<|endoftext|>"), ElementsAre(27, 91, 437, 1659, 5239, 91, 29));
}

TEST(Gpt2Bpe, EndOfTextIsTheEodToken) {
  EXPECT_EQ(gpt2().special_tokens().eod, 50256);
  EXPECT_EQ(gpt2().token_text(50256), "<|endoftext|>");
  EXPECT_FALSE(gpt2().special_tokens().cls.has_value());
}

TEST(Gpt2Bpe, VocabularyHas50257Tokens) { EXPECT_EQ(gpt2().vocab_size(), 50257); }

TEST(Gpt2Bpe, TokenTextIsTheVocabularySpelling) {
  EXPECT_EQ(gpt2().token_text(220), "Ġ");
  EXPECT_EQ(gpt2().token_text(23748), "Ġhello");
}

TEST(Gpt2Bpe, EmptyTextEncodesToNothing) { EXPECT_TRUE(gpt2().encode("").empty()); }

// ---------------------------------------------------------------------------------------------
// Round trips and thread safety.

TEST(Gpt2Bpe, DecodeInvertsEncodeOnTheGoldenTexts) {
  std::ifstream in(std::string(MEGATRON_SOURCE_DIR) + "/tests/data/golden/tokenizers.jsonl");
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const std::string text = nlohmann::json::parse(line).at("text");
    EXPECT_EQ(gpt2().decode(gpt2().encode(text)), text);
  }
}

TEST(Gpt2Bpe, DecodeInvertsEncodeOnEverySingleByte) {
  for (int b = 0; b < 256; ++b) {
    const std::string text(1, static_cast<char>(b));
    EXPECT_EQ(gpt2().decode(gpt2().encode(text)), text) << "byte " << b;
  }
}

TEST(Gpt2Bpe, DecodeInvertsEncodeOnRandomTextWithInvalidUtf8) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    const std::string text = random_text(rng, 1 + rng() % 40);
    ASSERT_EQ(gpt2().decode(gpt2().encode(text)), text) << "text: " << text;
  }
}

TEST(Gpt2Bpe, DecodeInvertsEncodeOnRandomBytes) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 1000; ++trial) {
    std::string text(rng() % 64, '\0');
    for (char& c : text) c = static_cast<char>(rng());
    ASSERT_EQ(gpt2().decode(gpt2().encode(text)), text);
  }
}

TEST(Gpt2Bpe, LongWordsRoundTrip) {
  // A long run is one pre-token; BPE on it must stay exact (and fast).
  std::string cjk;
  for (int i = 0; i < 3000; ++i) unicode::append_utf8(cjk, 0x4E00 + (i * 7919) % 0x5000);
  const std::string dashes(20000, '-');
  EXPECT_EQ(gpt2().decode(gpt2().encode(cjk)), cjk);
  EXPECT_EQ(gpt2().decode(gpt2().encode(dashes)), dashes);
}

TEST(Gpt2Bpe, CachedWordsEncodeAsTheFirstTime) {
  const auto tokenizer = load_gpt2_bpe(kVocab, kMerges);
  const std::string text = "the cat and the hat and the bat";
  const std::vector<int32_t> first = tokenizer->encode(text);
  EXPECT_EQ(tokenizer->encode(text), first);
  // Interleaving with a second tokenizer on the same thread must not mix their caches.
  EXPECT_EQ(gpt2().encode(text), first);
  EXPECT_EQ(tokenizer->encode(text), first);
}

TEST(Gpt2Bpe, EncodesTheSameFromSeveralThreads) {
  std::mt19937 rng(3);
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i) texts.push_back(random_text(rng, 50));
  std::vector<std::vector<int32_t>> expected;
  for (const std::string& text : texts) expected.push_back(gpt2().encode(text));

  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (std::size_t i = 0; i < texts.size(); ++i) {
        const std::size_t k = (i * 7 + t * 13) % texts.size();
        if (gpt2().encode(texts[k]) != expected[k]) ++mismatches[t];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_THAT(mismatches, ElementsAre(0, 0, 0, 0));
}

// ---------------------------------------------------------------------------------------------
// BPE order on hand-made merges, with the real vocabulary.

class Gpt2BpeFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gpt2_bpe_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& contents) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << contents;
    return path;
  }
  // The UserError message of loading these files, or "" if they load.
  static std::string load_error(const std::string& vocab, const std::string& merges) {
    try {
      load_gpt2_bpe(vocab, merges);
    } catch (const UserError& e) {
      return e.what();
    }
    return "";
  }
  std::vector<std::string> texts_of(const Tokenizer& tokenizer, std::string_view text) {
    std::vector<std::string> out;
    for (const int32_t id : tokenizer.encode(text)) out.push_back(tokenizer.token_text(id));
    return out;
  }

  std::filesystem::path dir_;
};

TEST_F(Gpt2BpeFiles, BestRankedPairMergesFirst) {
  const auto a = load_gpt2_bpe(kVocab, write("m.txt", "#version: 0.2\nl l\nh e\nhe ll\n"));
  EXPECT_THAT(texts_of(*a, "hello"), ElementsAre("hell", "o"));
  const auto b = load_gpt2_bpe(kVocab, write("n.txt", "#version: 0.2\ne l\nh e\nl l\n"));
  EXPECT_THAT(texts_of(*b, "hello"), ElementsAre("h", "el", "l", "o"));
}

TEST_F(Gpt2BpeFiles, OverlappingPairsMergeLeftToRight) {
  const auto tokenizer = load_gpt2_bpe(kVocab, write("m.txt", "a a\n"));
  EXPECT_THAT(texts_of(*tokenizer, "aaa"), ElementsAre("aa", "a"));
}

TEST_F(Gpt2BpeFiles, MergeCreatedInARoundWaitsForTheNextRound) {
  // encoder.py merges every (a, b) in "abab" before looking at the pairs that creates, so the
  // better-ranked (ab, a) never gets its chance: "ab" "ab", not "aba" "b".
  const auto tokenizer = load_gpt2_bpe(kVocab, write("m.txt", "ab a\na b\n"));
  EXPECT_THAT(texts_of(*tokenizer, "abab"), ElementsAre("ab", "ab"));
}

TEST_F(Gpt2BpeFiles, RepeatedMergeTakesItsLaterRank) {
  // As in encoder.py's dict(zip(merges, range(...))): "h e" ranks after "e l" here.
  const auto tokenizer = load_gpt2_bpe(kVocab, write("m.txt", "h e\ne l\nh e\n"));
  EXPECT_THAT(texts_of(*tokenizer, "hel"), ElementsAre("h", "el"));
}

TEST_F(Gpt2BpeFiles, MergesWithWindowsLineEndingsLoad) {
  const auto tokenizer = load_gpt2_bpe(kVocab, write("m.txt", "#version: 0.2\r\nh e\r\n"));
  EXPECT_THAT(texts_of(*tokenizer, "he"), ElementsAre("he"));
}

TEST_F(Gpt2BpeFiles, VocabularyWithoutEndOfTextHasNoEod) {
  std::string vocab = "{";
  const auto& real = gpt2();
  for (int32_t id = 0; id < 256; ++id) {
    vocab +=
        (id ? "," : "") + nlohmann::json(real.token_text(id)).dump() + ":" + std::to_string(id);
  }
  vocab += "}";
  const auto tokenizer = load_gpt2_bpe(write("v.json", vocab), write("m.txt", ""));
  EXPECT_FALSE(tokenizer->special_tokens().eod.has_value());
  EXPECT_EQ(tokenizer->vocab_size(), 256);
  EXPECT_EQ(tokenizer->decode(tokenizer->encode("any bytes \xFF")), "any bytes \xFF");
}

// ---------------------------------------------------------------------------------------------
// Errors name the file and what is wrong with it.

TEST_F(Gpt2BpeFiles, MissingVocabularyFileIsNamed) {
  const std::string missing = (dir_ / "nope.json").string();
  EXPECT_THAT(load_error(missing, kMerges),
              HasSubstr("cannot open GPT-2 vocabulary file '" + missing + "'"));
}

TEST_F(Gpt2BpeFiles, MissingMergesFileIsNamed) {
  const std::string missing = (dir_ / "nope.txt").string();
  EXPECT_THAT(load_error(kVocab, missing),
              HasSubstr("cannot open GPT-2 merges file '" + missing + "'"));
}

TEST_F(Gpt2BpeFiles, DirectoryIsNotAMergesFile) {
  EXPECT_THAT(load_error(kVocab, dir_.string()),
              HasSubstr("GPT-2 merges file '" + dir_.string() + "' is a directory"));
}

TEST_F(Gpt2BpeFiles, MalformedJsonIsReported) {
  const std::string vocab = write("v.json", "{\"a\": 0,");
  const std::string error = load_error(vocab, kMerges);
  EXPECT_THAT(error, HasSubstr(vocab));
  EXPECT_THAT(error, HasSubstr("is not valid JSON"));
}

TEST_F(Gpt2BpeFiles, VocabularyMustBeAnObject) {
  EXPECT_THAT(load_error(write("v.json", "[1, 2]"), kMerges),
              HasSubstr("must be a JSON object mapping each token to its id"));
}

TEST_F(Gpt2BpeFiles, VocabularyIdsMustBeZeroToSizeMinusOne) {
  EXPECT_THAT(load_error(write("v.json", R"({"a": 0, "b": 5})"), kMerges),
              HasSubstr("token 'b' has id 5; ids must be integers 0..1"));
  EXPECT_THAT(load_error(write("w.json", R"({"a": "zero"})"), kMerges),
              HasSubstr("token 'a' has id \"zero\""));
}

TEST_F(Gpt2BpeFiles, VocabularyIdsMustBeUnique) {
  EXPECT_THAT(load_error(write("v.json", R"({"a": 0, "b": 0})"), kMerges),
              HasSubstr("id 0 is given to two tokens, 'a' and 'b'"));
}

TEST_F(Gpt2BpeFiles, VocabularyMustHaveEveryByte) {
  EXPECT_THAT(load_error(write("v.json", R"({"a": 0})"), kMerges),
              HasSubstr("lacks the token 'Ā' for byte 0"));
}

TEST_F(Gpt2BpeFiles, MergesLineMustBeTwoTokens) {
  EXPECT_THAT(load_error(kVocab, write("m.txt", "#version: 0.2\nh e\nhello\n")),
              HasSubstr("line 3: expected two tokens separated by one space, found 'hello'"));
  EXPECT_THAT(load_error(kVocab, write("n.txt", "h e l\n")),
              HasSubstr("line 1: expected two tokens separated by one space, found 'h e l'"));
}

TEST_F(Gpt2BpeFiles, MergePartsMustBeInTheVocabulary) {
  const std::string merges = write("m.txt", "h e\nh <|zz|>\n");
  EXPECT_THAT(load_error(kVocab, merges), HasSubstr("GPT-2 merges file '" + merges +
                                                    "' line 2: '<|zz|>' is not in the "
                                                    "vocabulary '" +
                                                    kVocab + "'"));
}

TEST_F(Gpt2BpeFiles, MergeResultMustBeInTheVocabulary) {
  // "Ġ" and "Ġ" are tokens but "ĠĠ" is not one in GPT-2's vocabulary.
  EXPECT_THAT(load_error(kVocab, write("m.txt", "Ġ Ġ\n")),
              HasSubstr("line 1: '" + printable("ĠĠ") + "' is not in the vocabulary"));
}

TEST_F(Gpt2BpeFiles, BinaryGarbageFromAMergesFileIsEscapedInTheError) {
  EXPECT_THAT(load_error(kVocab, write("m.txt", std::string("\x01\x1b[2J\xff", 6) + "\n")),
              HasSubstr("found '\\x01\\x1b[2J\\xff'"));
}

TEST(Gpt2Bpe, DecodingAnUnknownIdIsAnError) {
  const std::vector<int32_t> ids = {50257};
  EXPECT_THROW(gpt2().decode(ids), UserError);
  EXPECT_THROW(gpt2().token_text(-1), UserError);
}

}  // namespace
}  // namespace megatron::data
