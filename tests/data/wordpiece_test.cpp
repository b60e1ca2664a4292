// The BERT WordPiece tokenizer: Hugging Face's ids on the golden texts, then one behaviour of
// the pipeline per test (cleaning, CJK, accents, punctuation, pieces, limits, vocab errors).
#include "data/wordpiece.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "data/wordpiece_extras.hpp"
#include "support/temp_dir.hpp"

namespace megatron::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const std::string kSourceDir = MEGATRON_SOURCE_DIR;
const std::string kUncasedVocab = kSourceDir + "/data/tokenizers/bert-base-uncased/vocab.txt";

// The pieces `text` encodes to, spelled as the vocabulary spells them.
std::vector<std::string> pieces(const Tokenizer& tokenizer, std::string_view text) {
  std::vector<std::string> out;
  for (const int32_t id : tokenizer.encode(text)) out.push_back(tokenizer.token_text(id));
  return out;
}

// bert-base-uncased, loaded once for the whole suite.
class WordPieceUncased : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { tokenizer_ = load_wordpiece(kUncasedVocab, true); }
  static void TearDownTestSuite() { tokenizer_.reset(); }
  static const Tokenizer& bert() { return *tokenizer_; }

 private:
  static inline std::unique_ptr<Tokenizer> tokenizer_;
};

// ---- The reference: Hugging Face's BertWordPieceTokenizer(lowercase=True) ----

TEST_F(WordPieceUncased, ReproducesHuggingFaceIdsOnEveryGoldenText) {
  std::ifstream golden(kSourceDir + "/tests/data/golden/tokenizers.jsonl");
  ASSERT_TRUE(golden) << "missing tests/data/golden/tokenizers.jsonl";
  int texts = 0;
  std::string line;
  while (std::getline(golden, line)) {
    const auto record = nlohmann::json::parse(line);
    const auto text = record.at("text").get<std::string>();
    const auto expected = record.at("bert_uncased").get<std::vector<int32_t>>();
    EXPECT_EQ(bert().encode(text), expected) << "text: " << text;
    ++texts;
  }
  EXPECT_EQ(texts, 48);
}

// ---- Normalisation and pre-tokenisation ----

TEST_F(WordPieceUncased, SplitsOffEachPunctuationCharacter) {
  EXPECT_THAT(pieces(bert(), "Hello, world!"), ElementsAre("hello", ",", "world", "!"));
  EXPECT_THAT(pieces(bert(), "don't"), ElementsAre("don", "'", "t"));
  EXPECT_THAT(pieces(bert(), "a...b"), ElementsAre("a", ".", ".", ".", "b"));
}

TEST_F(WordPieceUncased, CountsEveryAsciiSymbolAsPunctuation) {
  // Unicode files $ + < = > ^ ` | ~ under symbols (S*), but BERT splits them off all the same.
  EXPECT_THAT(pieces(bert(), "a$b+c<d=e>f^g`h|i~j"),
              ElementsAre("a", "$", "b", "+", "c", "<", "d", "=", "e", ">", "f", "^", "g", "`", "h",
                          "|", "i", "~", "j"));
}

TEST_F(WordPieceUncased, SplitsOffUnicodePunctuation) {
  EXPECT_THAT(pieces(bert(), "a\u2014b \u00abx\u00bb"),
              ElementsAre("a", "\u2014", "b", "\u00ab", "x", "\u00bb"));
}

TEST_F(WordPieceUncased, MakesEachCjkIdeographAWordOfItsOwn) {
  EXPECT_THAT(pieces(bert(), "中文abc"), ElementsAre("中", "文", "abc"));
  EXPECT_THAT(pieces(bert(), "日本語"), ElementsAre("日", "本", "語"));
}

TEST_F(WordPieceUncased, UsesHuggingFacesCjkRangesWhereTheyDifferFromGooglesBert) {
  // Hugging Face starts CJK Extension E at U+2B920; U+2B820..U+2B91F stay inside words.
  EXPECT_THAT(pieces(bert(), "a\U0002B920b"), ElementsAre("a", "[UNK]", "b"));
  EXPECT_THAT(pieces(bert(), "a\U0002B820b"), ElementsAre("[UNK]"));
}

TEST_F(WordPieceUncased, LeavesKanaInOrdinaryWords) {
  // Only the CJK ideograph blocks are isolated; katakana after them forms one word.
  EXPECT_THAT(pieces(bert(), "東京タワー"), ElementsAre("東", "京", "タ", "##ワ", "##ー"));
}

TEST_F(WordPieceUncased, LowercasesAndStripsAccents) {
  EXPECT_THAT(pieces(bert(), "Café NAÏVE"), ElementsAre("cafe", "naive"));
  // A combining accent on its own input character goes too.
  EXPECT_THAT(pieces(bert(), "Cafe\u0301"), ElementsAre("cafe"));
}

TEST_F(WordPieceUncased, DecomposesHangulSyllablesIntoJamo) {
  // A side effect of NFD that bert-base-uncased was trained with.
  EXPECT_THAT(pieces(bert(), "한"), ElementsAre("ᄒ", "##ᅡ", "##ᆫ"));
}

TEST_F(WordPieceUncased, DropsControlFormatAndPrivateUseCharacters) {
  // BEL (Cc), ZERO WIDTH SPACE (Cf) and U+E000 (Co) vanish without splitting the word.
  EXPECT_THAT(pieces(bert(), "wo\ard wo\u200Brd wo\uE000rd"), ElementsAre("word", "word", "word"));
}

TEST_F(WordPieceUncased, DropsVerticalTabAndNextLineRatherThanSplitOnThem) {
  // They are White_Space, but as control characters they are removed before spaces are mapped.
  EXPECT_THAT(pieces(bert(), "a\vb c\u0085d"), ElementsAre("ab", "cd"));
}

TEST_F(WordPieceUncased, SplitsOnTabsNewlinesAndUnicodeSpaces) {
  EXPECT_THAT(pieces(bert(), "a\tb\nc\r\nd\u00A0e\u3000f"),
              ElementsAre("a", "b", "c", "d", "e", "f"));
}

TEST_F(WordPieceUncased, DropsInvalidUtf8Bytes) {
  EXPECT_THAT(pieces(bert(), "wo\xFFrd"), ElementsAre("word"));
}

TEST_F(WordPieceUncased, EmptyOrBlankTextHasNoTokens) {
  EXPECT_THAT(bert().encode(""), IsEmpty());
  EXPECT_THAT(bert().encode(" \t\r\n\u3000"), IsEmpty());
}

// ---- WordPiece on the real vocabulary ----

TEST_F(WordPieceUncased, SplitsAWordOutsideTheVocabularyIntoContinuationPieces) {
  EXPECT_THAT(pieces(bert(), "unaffable"), ElementsAre("una", "##ffa", "##ble"));
}

TEST_F(WordPieceUncased, AddsNoClsOrSep) {
  EXPECT_THAT(pieces(bert(), "hello"), ElementsAre("hello"));
}

TEST_F(WordPieceUncased, FindsSpecialTokensByName) {
  const SpecialTokens& special = bert().special_tokens();
  EXPECT_EQ(special.pad, 0);
  EXPECT_EQ(special.unk, 100);
  EXPECT_EQ(special.cls, 101);
  EXPECT_EQ(special.sep, 102);
  EXPECT_EQ(special.mask, 103);
  EXPECT_EQ(special.eod, std::nullopt);
  EXPECT_EQ(bert().vocab_size(), 30522);
}

TEST_F(WordPieceUncased, EncodesTheSameFromManyThreadsAtOnce) {
  const std::string text =
      "Emma Woodhouse, handsome, clever, and rich — naïve café 中文 unaffable. ";
  const auto expected = bert().encode(text);
  std::vector<std::vector<int32_t>> results(8);
  std::vector<std::thread> threads;
  for (auto& result : results) {
    threads.emplace_back([&result, &text] {
      for (int i = 0; i < 200; ++i) result = bert().encode(text);
    });
  }
  for (auto& thread : threads) thread.join();
  for (const auto& result : results) EXPECT_EQ(result, expected);
}

// ---- Decoding ----

TEST_F(WordPieceUncased, DecodeGluesContinuationPiecesToThePieceBefore) {
  EXPECT_EQ(bert().decode(bert().encode("unaffable day")), "unaffable day");
}

TEST_F(WordPieceUncased, DecodeSeparatesEveryOtherTokenWithASpace) {
  // Cleanup is off: punctuation keeps the space BERT's splitting put before it.
  EXPECT_EQ(bert().decode(bert().encode("Hello, world!")), "hello , world !");
}

TEST_F(WordPieceUncased, DecodeWritesSpecialTokensOut) {
  const std::vector<int32_t> ids = {101, 7592, 102};
  EXPECT_EQ(bert().decode(ids), "[CLS] hello [SEP]");
}

TEST_F(WordPieceUncased, DecodeKeepsTheHashesOfALeadingContinuationPiece) {
  const std::vector<int32_t> ids = {2015, 7592};  // "##s", "hello"
  EXPECT_EQ(bert().decode(ids), "##s hello");
}

TEST_F(WordPieceUncased, DecodeRejectsAnIdOutsideTheVocabulary) {
  const std::vector<int32_t> ids = {30522};
  EXPECT_THROW(bert().decode(ids), UserError);
  EXPECT_THROW(bert().token_text(-1), UserError);
}

// ---- Tiny vocabularies, written for the test ----

// Ids follow line order: [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4 un=5 ... x=11 ##x=12 ...
constexpr const char* kTinyVocab =
    "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"
    "un\n##aff\n##a\n##ff\n##able\n##ble\n"
    "x\n##x\né\n##é\nHello\nCafé\ncafe\nhello\n";

class WordPieceTiny : public ::testing::Test {
 protected:
  std::unique_ptr<Tokenizer> load(const std::string& vocab, bool lower_case) {
    return load_wordpiece(dir_.write("vocab.txt", vocab).string(), lower_case);
  }
  std::unique_ptr<Tokenizer> cased() { return load(kTinyVocab, false); }
  std::unique_ptr<Tokenizer> uncased() { return load(kTinyVocab, true); }

  test_support::TempDir dir_;
};

TEST_F(WordPieceTiny, TakesTheLongestPieceAtEachStep) {
  // "un" then "##aff" (not "##a" + "##ff") then "##able" (not "##a" + "##ble").
  EXPECT_THAT(pieces(*cased(), "unaffable"), ElementsAre("un", "##aff", "##able"));
}

TEST_F(WordPieceTiny, WordThatCannotBeSplitToTheEndIsOneUnknown) {
  // The pieces matched before the dead end are discarded, not kept before an [UNK].
  EXPECT_THAT(pieces(*cased(), "unaffablez"), ElementsAre("[UNK]"));
  EXPECT_THAT(pieces(*cased(), "x unaffablez x"), ElementsAre("x", "[UNK]", "x"));
}

TEST_F(WordPieceTiny, ContinuationPiecesNeverStartAWord) {
  EXPECT_THAT(pieces(*cased(), "ff"), ElementsAre("[UNK]"));
}

TEST_F(WordPieceTiny, WordOfAHundredCharactersIsStillSplit) {
  const auto ids = cased()->encode(std::string(100, 'x'));
  ASSERT_EQ(ids.size(), 100u);
  EXPECT_EQ(ids.front(), 11);                             // x
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 12), 99);  // ##x
}

TEST_F(WordPieceTiny, WordOfMoreThanAHundredCharactersIsUnknown) {
  EXPECT_THAT(pieces(*cased(), std::string(101, 'x')), ElementsAre("[UNK]"));
}

TEST_F(WordPieceTiny, WordLengthLimitCountsCodePointsNotBytes) {
  std::string hundred;
  for (int i = 0; i < 100; ++i) hundred += "é";  // 200 bytes
  EXPECT_EQ(cased()->encode(hundred).size(), 100u);
  EXPECT_THAT(pieces(*cased(), hundred + "é"), ElementsAre("[UNK]"));
}

TEST_F(WordPieceTiny, CasedKeepsCaseAndAccents) {
  EXPECT_THAT(pieces(*cased(), "Hello Café"), ElementsAre("Hello", "Café"));
  EXPECT_THAT(pieces(*cased(), "HELLO cafe"), ElementsAre("[UNK]", "cafe"));
}

TEST_F(WordPieceTiny, UncasedStripsAccentsAndLowercases) {
  EXPECT_THAT(pieces(*uncased(), "Hello Café HELLO"), ElementsAre("hello", "cafe", "hello"));
}

TEST_F(WordPieceTiny, UncasedPutsSpacingMarksInCanonicalOrder) {
  // NFD sorts marks by combining class: U+1D16D (class 226) goes after U+1D165 (class 216).
  // Both are spacing marks (Mc), so accent stripping keeps them.
  const auto tokenizer = load("[UNK]\nx\U0001D165\U0001D16Dy\n", true);
  EXPECT_THAT(pieces(*tokenizer, "x\U0001D16D\U0001D165y"), ElementsAre("x\U0001D165\U0001D16Dy"));
}

TEST_F(WordPieceTiny, CasedStillDropsControlCharactersAndSplitsPunctuation) {
  EXPECT_THAT(pieces(*cased(), "Hel\u200Blo,x"), ElementsAre("Hello", "[UNK]", "x"));
}

TEST_F(WordPieceTiny, IdsAreLineIndices) {
  const auto tokenizer = cased();
  EXPECT_EQ(tokenizer->token_text(0), "[PAD]");
  EXPECT_EQ(tokenizer->token_text(5), "un");
  EXPECT_EQ(tokenizer->special_tokens().unk, 1);
  EXPECT_EQ(tokenizer->special_tokens().cls, 2);
}

TEST_F(WordPieceTiny, WindowsLineEndingsAreNotPartOfTokens) {
  const auto tokenizer = load("[UNK]\r\nx\r\n##x\r\n", false);
  EXPECT_THAT(pieces(*tokenizer, "xx"), ElementsAre("x", "##x"));
}

// ---- Bad vocabulary files ----

class WordPieceVocabFile : public WordPieceTiny {
 protected:
  // The message of the UserError that loading `vocab` throws ("" if it loads).
  std::string error_of(const std::string& vocab) {
    try {
      load(vocab, true);
    } catch (const UserError& e) {
      return e.what();
    }
    return "";
  }
  std::string path() const { return (dir_.path() / "vocab.txt").string(); }
};

TEST_F(WordPieceVocabFile, MissingFileIsNamed) {
  const std::string missing = (dir_.path() / "nope.txt").string();
  try {
    load_wordpiece(missing, true);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr(missing + ": "));
    EXPECT_THAT(std::string(e.what()), HasSubstr("does not exist"));
  }
}

TEST_F(WordPieceVocabFile, EmptyVocabularyIsAnError) {
  EXPECT_EQ(error_of(""), path() + ": the WordPiece vocabulary is empty");
}

TEST_F(WordPieceVocabFile, DuplicateTokenNamesBothLines) {
  EXPECT_EQ(error_of(std::string(kTinyVocab) + "##ff\n"),
            path() + ": duplicate token \"##ff\" on line 20 (first on line 9)");
}

TEST_F(WordPieceVocabFile, VocabularyWithoutUnkIsAnError) {
  EXPECT_EQ(error_of("[CLS]\n[SEP]\nhello\n"), path() + ": the vocabulary has no [UNK] token");
}

TEST_F(WordPieceVocabFile, EmptyLineIsAnError) {
  EXPECT_THAT(error_of("[UNK]\n\nhello\n"), HasSubstr(path() + ": line 2 is empty"));
}

}  // namespace
}  // namespace megatron::data

namespace megatron::data {
namespace {

TEST_F(WordPieceUncased, MegatronAppendsBosEosThenTheSentinelsInOrder) {
  // Megatron's _BertWordPieceTokenizer(vocab_extra_ids=100) on bert-base-uncased: [BOS] 30522,
  // [EOS] 30523, <extra_id_0> 30524 .. <extra_id_99> 30623, vocab_size 30624.
  const WordPieceExtras extras = wordpiece_extras(bert(), 100);
  EXPECT_EQ(extras.bos, 30522);
  EXPECT_EQ(extras.eos, 30523);
  ASSERT_EQ(extras.sentinels.size(), 100u);
  EXPECT_EQ(extras.sentinels.front(), 30524);
  EXPECT_EQ(extras.sentinels.back(), 30623);
  EXPECT_EQ(extras.vocab_size, 30624);
  EXPECT_EQ(wordpiece_extras(bert(), 0).vocab_size, 30524);
}

TEST(WordPieceExtras, TokensAlreadyInTheVocabularyKeepTheirIds) {
  test_support::TempDir dir;
  const auto path = dir.path() / "vocab.txt";
  std::ofstream(path) << "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n[EOS]\n<extra_id_1>\nword\n";
  const auto tokenizer = load_wordpiece(path.string(), true);
  const WordPieceExtras extras = wordpiece_extras(*tokenizer, 3);
  EXPECT_EQ(extras.bos, 8);
  EXPECT_EQ(extras.eos, 5);
  EXPECT_THAT(extras.sentinels, ElementsAre(9, 6, 10));
  EXPECT_EQ(extras.vocab_size, 11);
}

}  // namespace
}  // namespace megatron::data
