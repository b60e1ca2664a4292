// `megatron tokenizer train` as users run it: trains on a slice of the bundled Austen corpus,
// then the project's own tokenize command loads what it wrote; and its errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "cli/run_command.hpp"

namespace megatron::cli {
namespace tokenizer_cli_test {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// The first `n` chapters of the bundled corpus, as a JSONL file in `dir`.
std::string austen_chapters(const test_support::TempDir& dir, int n) {
  std::ifstream in(std::string(MEGATRON_SOURCE_DIR) + "/data/corpora/austen.jsonl");
  std::string text, line;
  for (int i = 0; i < n && std::getline(in, line); ++i) text += line + "\n";
  return dir.write("chapters.jsonl", text).string();
}

TEST(TokenizerCli, TrainWritesAVocabularyThatTokenizeLoads) {
  test_support::TempDir dir;
  const std::string input = austen_chapters(dir, 2);
  const std::string out = (dir.path() / "tok").string();
  const auto train =
      run_megatron("tokenizer train --input " + input + " --vocab-size 1000 --output-dir " + out);
  ASSERT_EQ(train.exit_code, 0) << train.err;
  EXPECT_THAT(train.out, StartsWith("trained a vocabulary of 1000 tokens (743 merges) from "));
  EXPECT_THAT(train.out, HasSubstr("wrote " + out + "/vocab.json and " + out + "/merges.txt"));
  EXPECT_THAT(train.err, HasSubstr("tokenizer train: 743 merges, 999/999 tokens, "));

  const auto tokenize =
      run_megatron("tokenize --tokenizer gpt2-bpe --vocab-file " + out +
                   "/vocab.json --merge-file " + out + "/merges.txt --show-tokens --input " +
                   dir.write("in.jsonl", "{\"text\": \" Emma\"}\n").string());
  ASSERT_EQ(tokenize.exit_code, 0) << tokenize.err;
  EXPECT_THAT(tokenize.out, HasSubstr("\"tokens\":[\"ĠEmma\"]"));
}

TEST(TokenizerCli, ReadsEveryInputGiven) {
  test_support::TempDir dir;
  const std::string a = dir.write("a.jsonl", "{\"text\": \"abab\"}\n").string();
  const std::string b = dir.write("b.jsonl", "{\"text\": \"abab\"}\n").string();
  const auto r = run_megatron("tokenizer train --quiet --input " + a + " --input " + b +
                              " --vocab-size 300 --output-dir " + dir.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // "abab" twice: (a,b) 4 times, then (ab,ab) twice; nothing after.
  EXPECT_THAT(r.out, StartsWith("trained a vocabulary of 259 tokens (2 merges) from 1 distinct "
                                "words (2 in all, 2 documents)"));
  EXPECT_THAT(r.out,
              HasSubstr("stopped short of 300 tokens: no pair left that occurs at least 2 times"));
}

TEST(TokenizerCli, RefusesToReplaceATokenizerWithoutForce) {
  test_support::TempDir dir;
  const std::string input = dir.write("in.jsonl", "{\"text\": \"abab\"}\n").string();
  const std::string args = "tokenizer train --quiet --input " + input +
                           " --vocab-size 300 --output-dir " + dir.path().string();
  ASSERT_EQ(run_megatron(args).exit_code, 0);
  const auto again = run_megatron(args);
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_THAT(again.err, HasSubstr("vocab.json' already exists; pass --force to replace it"));
  EXPECT_EQ(run_megatron(args + " --force").exit_code, 0);
}

TEST(TokenizerCli, AnUnwritableOutputDirectoryIsRefusedBeforeTheCorpusIsRead) {
  test_support::TempDir dir;
  const std::string input = dir.write("in.jsonl", "{\"text\": \"abab\"}\n").string();
  const auto r = run_megatron("tokenizer train --quiet --input " + input +
                              " --vocab-size 300 --output-dir /proc/megatron-tokenizer");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, StartsWith("megatron: error: --output-dir /proc/megatron-tokenizer: cannot "));
}

TEST(TokenizerCli, AVocabularySizeBelow257IsBadInput) {
  test_support::TempDir dir;
  const std::string input = dir.write("in.jsonl", "{\"text\": \"abab\"}\n").string();
  const auto r = run_megatron("tokenizer train --input " + input +
                              " --vocab-size 256 --output-dir " + dir.path().string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, StartsWith("megatron: error: --vocab-size 256 is too small: a byte-level BPE "
                                "vocabulary holds the 256 byte tokens and <|endoftext|>, so it "
                                "needs at least 257\n"));
}

TEST(TokenizerCli, ABadLineIsNamedByFileAndLine) {
  test_support::TempDir dir;
  const std::string input = dir.write("in.jsonl", "{\"text\": \"ok\"}\n{\"text\": \"cut").string();
  const auto r = run_megatron("tokenizer train --input " + input +
                              " --vocab-size 300 --output-dir " + (dir.path() / "out").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, StartsWith("megatron: error: " + input + ":2: "));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "out"));
}

TEST(TokenizerCli, AMissingInputIsBadInput) {
  test_support::TempDir dir;
  const auto r = run_megatron("tokenizer train --input " + (dir.path() / "none.jsonl").string() +
                              " --vocab-size 300 --output-dir " + dir.path().string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("none.jsonl"));
}

}  // namespace tokenizer_cli_test
}  // namespace megatron::cli
