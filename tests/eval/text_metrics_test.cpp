// Generation metrics against their public references: SQuAD v1.1's EM and F1 on hand-worked
// examples, sacreBLEU's corpus BLEU, chrF and 13a tokens on golden values from sacreBLEU itself.
//
// The golden values come from PyPI sacrebleu 2.6.0 under Python 3.11.7, printed with repr():
//   import sacrebleu
//   from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
//   b = sacrebleu.corpus_bleu(hyps, refs)   # refs[k][i]: stream k's reference for hyps[i]
//   print(repr(b.score), [repr(p) for p in b.precisions], repr(b.bp), repr(b.ratio),
//         b.sys_len, b.ref_len, b.counts, b.totals)
//   print(repr(sacrebleu.corpus_chrf(hyps, refs).score))
//   print(repr(Tokenizer13a()(text)))
// with hyps and refs as written in each test.
#include "eval/text_metrics.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace megatron::eval {
namespace {

// The implementation repeats sacreBLEU's double operations in its order with the same libm, and
// agrees bit for bit on thousands of random corpora; 1e-12 relative still leaves room for the
// last-place differences of another libm's exp/log or of Python 3.12+'s compensated sum(), and
// is a thousand times tighter than the 1e-9 any reported (2-decimal) figure needs.
void expect_close(double actual, double expected) {
  EXPECT_NEAR(actual, expected, 1e-12 * std::max(1.0, std::abs(expected)))
      << "actual " << actual << ", sacreBLEU " << expected;
}

using Refs = std::vector<std::vector<std::string>>;

// --- SQuAD v1.1 ------------------------------------------------------------------------------

TEST(SquadNormalize, LowercasesAndDropsAsciiPunctuationAndArticles) {
  EXPECT_EQ(squad_normalize("The Cat, a Dog & an  Ant!"), "cat dog ant");
}

TEST(SquadNormalize, DropsArticlesOnlyAsWholeWords) {
  EXPECT_EQ(squad_normalize("Theater and anathema; THE end"), "theater and anathema end");
}

TEST(SquadNormalize, JoinsWordsAroundRemovedPunctuation) {
  // string.punctuation includes the apostrophe and the underscore: nothing is left to split on.
  EXPECT_EQ(squad_normalize("Don't the_cat"), "dont thecat");
}

TEST(SquadNormalize, KeepsNonAsciiPunctuationButSeesWordsAsPythonsUnicodeRegexDoes) {
  // The dash is not in string.punctuation, and as a non-word character it leaves "a" a word.
  EXPECT_EQ(squad_normalize("a\u2014b"), "\u2014b");
  // é is a word character to Python's \b, so "thé" is no article.
  EXPECT_EQ(squad_normalize("th\u00e9 the"), "th\u00e9");
}

TEST(SquadNormalize, LowercasesLikePythonIncludingFinalSigmaAndDottedCapitalI) {
  EXPECT_EQ(squad_normalize("Caf\u00c9 \u00dcN\u00cfCODE"), "caf\u00e9 \u00fcn\u00efcode");
  // ΟΔΥΣΣΕΥΣ: capital sigma lowers to final ς only at the end of the word.
  EXPECT_EQ(squad_normalize("\u039f\u0394\u03a5\u03a3\u03a3\u0395\u03a5\u03a3"),
            "\u03bf\u03b4\u03c5\u03c3\u03c3\u03b5\u03c5\u03c2");
  EXPECT_EQ(squad_normalize("\u0130"), "i\u0307");  // İ is two code points in lower case
}

TEST(SquadNormalize, CollapsesPythonWhitespaceIncludingNoBreakAndIdeographicSpaces) {
  EXPECT_EQ(squad_normalize(" x\u00a0\u00a0y\u3000z\t\n"), "x y z");
}

TEST(SquadNormalize, InvalidUtf8BecomesOneReplacementCharacterPerMaximalSubpart) {
  // Python's bytes.decode("utf-8", errors="replace"): a truncated sequence is one U+FFFD, a
  // surrogate's encoding is three.
  EXPECT_EQ(squad_normalize("caf\xc3 \xe2\x80x \xed\xa0\x80"),
            "caf\ufffd \ufffdx \ufffd\ufffd\ufffd");
}

TEST(ExactMatch, IsOneWhenAnyGoldMatchesAfterNormalisation) {
  EXPECT_EQ(exact_match("the Eiffel Tower.", {"Paris", "Eiffel tower"}), 1.0);
}

TEST(ExactMatch, IsZeroForAPartialAnswer) {
  EXPECT_EQ(exact_match("Eiffel", {"Eiffel Tower"}), 0.0);
}

TEST(ExactMatch, EmptyPredictionMatchesOnlyAGoldThatNormalisesToNothing) {
  EXPECT_EQ(exact_match("", {"anything"}), 0.0);
  EXPECT_EQ(exact_match("The.", {"a"}), 1.0);  // both normalise to ""
}

TEST(TokenF1, IsTheHarmonicMeanOfTokenPrecisionAndRecall) {
  // [big red barn] vs [red barn near river]: 2 shared, precision 2/3, recall 2/4, F1 4/7.
  EXPECT_DOUBLE_EQ(token_f1("the big red barn", {"a red barn near the river"}), 4.0 / 7.0);
}

TEST(TokenF1, CountsRepeatedTokensOnlyAsOftenAsTheGoldHasThem) {
  // Counter intersection: one "cat" shared; precision 1/3, recall 1/2, F1 2/5.
  EXPECT_DOUBLE_EQ(token_f1("cat cat cat", {"cat dog"}), 0.4);
}

TEST(TokenF1, TakesTheBestGold) {
  // "blue house" shares nothing; "red barn door": precision 1, recall 2/3, F1 4/5.
  EXPECT_DOUBLE_EQ(token_f1("Red barn", {"blue house", "red barn door"}), 0.8);
}

TEST(TokenF1, EmptyPredictionScoresZeroEvenAgainstAnEmptyGoldAsInV11) {
  EXPECT_EQ(token_f1("", {"anything"}), 0.0);
  EXPECT_EQ(token_f1("the", {"a"}), 0.0);  // no shared token: v1.1 returns 0 (v2.0 returns 1)
}

TEST(SquadMetrics, RejectNoGolds) {
  EXPECT_THROW(exact_match("x", {}), std::invalid_argument);
  EXPECT_THROW(token_f1("x", {}), std::invalid_argument);
}

// --- sacreBLEU's 13a tokens --------------------------------------------------------------------

TEST(Tokenize13a, SplitsPunctuationButKeepsNumbersAndNonAsciiWhole) {
  EXPECT_EQ(
      tokenize_13a("Gr\u00fc\u00dfe, na\u00efve caf\u00e9 \u2014 3.5% of 1,000 items (approx.)."),
      "Gr\u00fc\u00dfe , na\u00efve caf\u00e9 \u2014 3.5 % of 1,000 items ( approx . ) .");
}

TEST(Tokenize13a, UnescapesTheFourEntities) {
  EXPECT_EQ(tokenize_13a("&quot;Hi&quot; &amp; bye &lt;3&gt;"), "\" Hi \" & bye < 3 >");
}

TEST(Tokenize13a, DropsSkippedMarkersAndJoinsLinesBrokenAtAHyphen) {
  EXPECT_EQ(tokenize_13a("a-\nb<skipped> c"), "ab c");
}

TEST(Tokenize13a, SplitsPeriodsCommasAndDashesByTheirDigitNeighbours) {
  EXPECT_EQ(tokenize_13a("1,000.5 items, 3-4 days. End."), "1,000.5 items , 3 - 4 days . End .");
  EXPECT_EQ(tokenize_13a("(hi) it's e.g. U.S.A. x.y 5.x"),
            "( hi ) it's e . g . U . S . A . x . y 5 . x");
}

// --- sacreBLEU's corpus BLEU -------------------------------------------------------------------

const std::vector<std::string> kMultiHyps = {
    "The cat sat on the mat.", "It is raining today in Paris.", "He read the book quickly."};
const Refs kMultiRefs = {
    {"The cat is on the mat.", "It rains in Paris today.", "He quickly read the book."},
    {"There is a cat on the mat.", "Today it is raining in Paris.", "He read the book fast."}};

TEST(CorpusBleu, MatchesSacrebleuWithTwoReferenceStreams) {
  const BleuScore b = corpus_bleu(kMultiHyps, kMultiRefs);
  expect_close(b.score, 43.645401277616955);
  expect_close(b.precisions[0], 95.0);
  expect_close(b.precisions[1], 58.8235294117647);
  expect_close(b.precisions[2], 35.714285714285715);
  expect_close(b.precisions[3], 18.181818181818183);
  EXPECT_EQ(b.counts, (std::array<int64_t, 4>{19, 10, 5, 2}));
  EXPECT_EQ(b.totals, (std::array<int64_t, 4>{20, 17, 14, 11}));
  EXPECT_EQ(b.brevity_penalty, 1.0);
  EXPECT_EQ(b.hyp_len, 20);
  EXPECT_EQ(b.ref_len, 20);
}

TEST(CorpusBleu, AppliesTheBrevityPenaltyToAShortHypothesis) {
  const BleuScore b =
      corpus_bleu({"the quick brown fox jumps"}, {{"the quick brown fox jumps over the lazy dog"}});
  expect_close(b.score, 44.932896411722176);
  expect_close(b.brevity_penalty, 0.44932896411722156);
  expect_close(b.ratio, 0.5555555555555556);
  EXPECT_EQ(b.hyp_len, 5);
  EXPECT_EQ(b.ref_len, 9);
}

TEST(CorpusBleu, SmoothsAnOrderWithoutMatchesExponentially) {
  // No 4-gram matches: precision 100 / (2 * 4 four-grams).
  const BleuScore b = corpus_bleu({"the cat sat down on the mat"}, {{"the cat sat on the mat"}});
  expect_close(b.score, 41.11336169005196);
  expect_close(b.precisions[2], 40.0);
  expect_close(b.precisions[3], 12.5);
  expect_close(b.ratio, 1.1666666666666667);
}

TEST(CorpusBleu, MatchesSacrebleuOnPunctuationAndNonAsciiText) {
  const BleuScore b =
      corpus_bleu({"Gr\u00fc\u00dfe, na\u00efve caf\u00e9 \u2014 3.5% of 1,000 items (approx.).",
                   "Le caf\u00e9 co\u00fbte 3,50 \u20ac \u2014 trop cher!"},
                  {{"Gr\u00fc\u00dfe, naive caf\u00e9 \u2014 3.5 % of 1,000 items, approx.",
                    "Le caf\u00e9 co\u00fbte 3,50 \u20ac, c'est trop cher !"}});
  expect_close(b.score, 52.43058981203548);
  expect_close(b.precisions[3], 33.333333333333336);
  EXPECT_EQ(b.hyp_len, 24);
  EXPECT_EQ(b.ref_len, 23);
}

TEST(CorpusBleu, CountsAnEmptyHypothesisAsZeroTokensAgainstItsReference) {
  const BleuScore b =
      corpus_bleu({"", "the cat sat on the mat"}, {{"a dog", "the cat sat on the mat"}});
  expect_close(b.score, 71.65313105737896);
  expect_close(b.brevity_penalty, 0.7165313105737893);
  EXPECT_EQ(b.hyp_len, 6);
  EXPECT_EQ(b.ref_len, 8);
}

TEST(CorpusBleu, IsZeroWhenEveryHypothesisIsEmpty) {
  const BleuScore b = corpus_bleu({""}, {{"hello world"}});
  EXPECT_EQ(b.score, 0.0);
  EXPECT_EQ(b.brevity_penalty, 0.0);
  EXPECT_EQ(b.hyp_len, 0);
  EXPECT_EQ(b.ref_len, 2);
}

TEST(CorpusBleu, IsZeroWhenAnOrderHasNoNgramsAtAll) {
  // One token: no bigrams, so orders 2..4 keep precision 0 and zero the geometric mean.
  const BleuScore b = corpus_bleu({"", "abc"}, {{"x", "abc"}, {"xxxxxxxxxx", "abd"}});
  EXPECT_EQ(b.score, 0.0);
  expect_close(b.precisions[0], 100.0);
  EXPECT_EQ(b.precisions[1], 0.0);
  expect_close(b.brevity_penalty, 0.36787944117144233);
}

TEST(CorpusBleu, TakesTheShorterReferenceLengthOnATie) {
  const BleuScore b = corpus_bleu({"one two three four five"},
                                  {{"one two three four five six"}, {"one two three four"}});
  EXPECT_EQ(b.ref_len, 4);
  expect_close(b.score, 100.00000000000004);
  expect_close(b.ratio, 1.25);
}

TEST(CorpusBleu, SignatureIsSacrebleus) {
  EXPECT_EQ(corpus_bleu({"a"}, {{"a"}, {"a"}}).signature,
            "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0");
}

// --- sacreBLEU's corpus chrF -------------------------------------------------------------------

TEST(CorpusChrf, MatchesSacrebleuWithTwoReferenceStreams) {
  expect_close(corpus_chrf(kMultiHyps, kMultiRefs).score, 70.01765592319313);
}

TEST(CorpusChrf, MatchesSacrebleuOnShortAndSmoothedCases) {
  expect_close(
      corpus_chrf({"the quick brown fox jumps"}, {{"the quick brown fox jumps over the lazy dog"}})
          .score,
      62.17503604995832);
  expect_close(corpus_chrf({"the cat sat down on the mat"}, {{"the cat sat on the mat"}}).score,
               76.89201840905423);
}

TEST(CorpusChrf, CountsCodePointsNotBytes) {
  expect_close(
      corpus_chrf({"Gr\u00fc\u00dfe, na\u00efve caf\u00e9 \u2014 3.5% of 1,000 items (approx.).",
                   "Le caf\u00e9 co\u00fbte 3,50 \u20ac \u2014 trop cher!"},
                  {{"Gr\u00fc\u00dfe, naive caf\u00e9 \u2014 3.5 % of 1,000 items, approx.",
                    "Le caf\u00e9 co\u00fbte 3,50 \u20ac, c'est trop cher !"}})
          .score,
      76.74366471484937);
}

TEST(CorpusChrf, SumsAnEmptyHypothesisReferenceIntoTheCorpusRecall) {
  expect_close(
      corpus_chrf({"", "the cat sat on the mat"}, {{"a dog", "the cat sat on the mat"}}).score,
      92.76914579380899);
  EXPECT_EQ(corpus_chrf({""}, {{"hello world"}}).score, 0.0);
}

TEST(CorpusChrf, TakesTheFirstReferenceWhenReferencesTie) {
  // The empty hypothesis scores 0 against both; sacreBLEU keeps the first ("x"), whose single
  // character is all the recall it loses.
  expect_close(corpus_chrf({"", "abc"}, {{"x", "abc"}, {"xxxxxxxxxx", "abd"}}).score,
               93.22033898305084);
}

TEST(CorpusChrf, DropsHypothesisNgramsOfOrdersItsReferenceIsTooShortToHave) {
  // "ab" has no 3- to 6-grams, so sacreBLEU does not count "abcdef"'s either: the corpus
  // precision of those orders comes from the second segment alone.
  expect_close(corpus_chrf({"abcdef", "the cat sat"}, {{"ab", "the cat sat"}}).score,
               97.92669381710478);
}

TEST(CorpusChrf, IgnoresWhitespace) {
  EXPECT_EQ(corpus_chrf({"the cat"}, {{"thecat"}}).score, 100.0);
}

TEST(CorpusChrf, SignatureIsSacrebleus) {
  const ChrfScore c = corpus_chrf({"a"}, {{"a"}, {"a"}});
  EXPECT_EQ(c.signature, "nrefs:2|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0");
  EXPECT_EQ(c.char_order, 6);
  EXPECT_EQ(c.word_order, 0);
  EXPECT_EQ(c.beta, 2.0);
}

// --- bad input ---------------------------------------------------------------------------------

TEST(CorpusMetrics, RejectAReferenceStreamOfTheWrongLength) {
  const Refs refs = {{"a", "b"}, {"a"}};
  EXPECT_THROW(corpus_bleu({"a", "b"}, refs), std::invalid_argument);
  EXPECT_THROW(corpus_chrf({"a", "b"}, refs), std::invalid_argument);
}

TEST(CorpusMetrics, RejectNoReferenceStreams) {
  EXPECT_THROW(corpus_bleu({"a"}, {}), std::invalid_argument);
  EXPECT_THROW(corpus_chrf({"a"}, {}), std::invalid_argument);
}

TEST(CorpusMetrics, RejectNoHypotheses) {
  EXPECT_THROW(corpus_bleu({}, {{}}), std::invalid_argument);
  EXPECT_THROW(corpus_chrf({}, {{}}), std::invalid_argument);
}

TEST(CorpusMetrics, NameTheStreamAndLengthsInTheError) {
  try {
    corpus_bleu({"a", "b"}, {{"a", "b"}, {"a"}});
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "corpus_bleu: reference stream 1 has 1 references for 2 hypotheses");
  }
}

}  // namespace
}  // namespace megatron::eval
