// Few-shot prompts as lm-evaluation-harness's first_n sampler builds them: the first N examples,
// each "context choice" and a blank line, then the question; a question never shows itself.
#include "eval/fewshot.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"

namespace megatron::eval {
namespace {

const std::vector<Choice> kQuestions = {
    {.context = "Red and", .choices = {"blue", "green"}, .gold = 1},
    {.context = "One, two,", .choices = {"three", "four"}, .gold = 0},
    {.context = "Salt and", .choices = {"pepper", "sugar"}, .gold = 0},
};

TEST(FewShot, NoShotsLeaveTheQuestionAsItIs) {
  EXPECT_EQ(fewshot_context({}, kQuestions[0]), "Red and");
}

TEST(FewShot, TheFirstExamplesComeBeforeTheQuestionEachWithItsAnswerAndABlankLine) {
  const FewShot f{.shots = 2, .examples = kQuestions};
  const Choice q{.context = "Bread and", .choices = {"butter"}, .gold = 0};
  EXPECT_EQ(fewshot_context(f, q), "Red and green\n\nOne, two, three\n\nBread and");
}

TEST(FewShot, AQuestionFromTheExamplesFileIsNeverItsOwnExample) {
  const FewShot f{.shots = 2, .examples = kQuestions, .examples_are_the_task = true};
  EXPECT_EQ(fewshot_context(f, kQuestions[0]), "One, two, three\n\nSalt and pepper\n\nRed and");
  EXPECT_EQ(fewshot_context(f, kQuestions[2]), "Red and green\n\nOne, two, three\n\nSalt and");
}

TEST(FewShot, MoreShotsThanExamplesIsRefusedSayingWhatWouldFixIt) {
  const FewShot f{.shots = 4, .examples = kQuestions};
  try {
    fewshot_context(f, kQuestions[0]);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--num-fewshot 4 needs 4 examples, but the few-shot file has only 3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace megatron::eval
