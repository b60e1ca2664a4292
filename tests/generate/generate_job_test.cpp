// megatron generate's job, the parts that need no model: which prompts it reads, and how much
// of a growing text it holds back from the stream.
#include "generate/generate_job.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/temp_dir.hpp"
#include "support/user_error.hpp"

namespace megatron::generate {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(UnfinishedUtf8, HoldsBackALeadByteWhoseContinuationHasNotArrived) {
  EXPECT_EQ(unfinished_utf8("caf\xC3"), 1u);
  EXPECT_EQ(unfinished_utf8("\xE2\x82"), 2u);
}

TEST(UnfinishedUtf8, ReleasesWholeCharactersAndAscii) {
  EXPECT_EQ(unfinished_utf8("caf\xC3\xA9"), 0u);
  EXPECT_EQ(unfinished_utf8("\xE2\x82\xAC"), 0u);
  EXPECT_EQ(unfinished_utf8(""), 0u);
}

TEST(ReadPrompts, RefusesBothAPromptAndAPromptsFile) {
  EXPECT_EQ(
      test_support::user_error_of([] { read_prompts({.prompt = "a", .prompts = "p.jsonl"}); }),
      "give one of --prompt TEXT and --prompts FILE.jsonl");
}

TEST(ReadPrompts, TakesTheNamedFieldOfEachRecordInOrder) {
  test_support::TempDir dir;
  const auto file = dir.write("p.jsonl", "{\"q\": \"one\"}\n\n{\"q\": \"two\"}\n");
  EXPECT_THAT(read_prompts({.prompts = file.string(), .field = "q"}), ElementsAre("one", "two"));
}

TEST(ReadPrompts, RefusesAPromptsFileWithoutPrompts) {
  test_support::TempDir dir;
  const auto file = dir.write("p.jsonl", "\n");
  EXPECT_THAT(test_support::user_error_of([&] { read_prompts({.prompts = file.string()}); }),
              HasSubstr("no prompts (one JSON object per line)"));
}

}  // namespace
}  // namespace megatron::generate
