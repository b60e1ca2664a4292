// Sentence splitting for --split-sentences: ends, abbreviations, initials, quotes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "data/sentence_splitter.hpp"

namespace megatron::data {
namespace {

using ::testing::ElementsAre;

TEST(SentenceSplitter, EndsSentencesAtFullStopsQuestionAndExclamationMarks) {
  EXPECT_THAT(split_sentences("It rained. Was it cold? Very!  Then it stopped."),
              ElementsAre("It rained.", "Was it cold?", "Very!", "Then it stopped."));
}

TEST(SentenceSplitter, AbbreviationsAndInitialsDoNotEndASentence) {
  EXPECT_THAT(split_sentences("Mr. Knightley met J. Smith at St. James's. They spoke."),
              ElementsAre("Mr. Knightley met J. Smith at St. James's.", "They spoke."));
}

TEST(SentenceSplitter, ALowercaseNextWordContinuesTheSentence) {
  EXPECT_THAT(split_sentences("He left at 5 p.m. on Monday. It was late."),
              ElementsAre("He left at 5 p.m. on Monday.", "It was late."));
}

TEST(SentenceSplitter, ClosingQuotesStayWithTheirSentence) {
  EXPECT_THAT(split_sentences("\"Is it you?\" she asked. \"Yes.\" He smiled."),
              ElementsAre("\"Is it you?\" she asked.", "\"Yes.\"", "He smiled."));
}

TEST(SentenceSplitter, PunctuationInsideAWordIsNotAnEnd) {
  EXPECT_THAT(split_sentences("Version 3.14 is out. See example.com now."),
              ElementsAre("Version 3.14 is out.", "See example.com now."));
}

TEST(SentenceSplitter, NewlinesEndSentencesOnlyWhenKept) {
  EXPECT_THAT(split_sentences("First line\nsecond line."), ElementsAre("First line\nsecond line."));
  EXPECT_THAT(split_sentences("First line\nsecond line.", true),
              ElementsAre("First line", "second line."));
}

TEST(SentenceSplitter, BlankTextHasNoSentences) {
  EXPECT_THAT(split_sentences("  \n "), ElementsAre());
}

}  // namespace
}  // namespace megatron::data
