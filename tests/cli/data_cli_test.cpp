// The data commands as users run them: preprocess, tokenize, data inspect, data merge.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/run_command.hpp"
#include "data/indexed_files.hpp"
#include "support/bytes.hpp"

namespace megatron::cli {
namespace data_cli_test {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kGpt2 =
    " --tokenizer gpt2-bpe --vocab-file data/tokenizers/gpt2/vocab.json"
    " --merge-file data/tokenizers/gpt2/merges.txt";

TEST(DataCli, TokenizeShowsIdsAndTokens) {
  test_support::TempDir dir;
  const auto input = dir.write("in.jsonl", "{\"text\": \"Hello, world!\"}\n");
  const auto r = run_megatron("tokenize" + kGpt2 + " --show-tokens --input " + input.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"ids\":[15496,11,995,0],\"tokens\":[\"Hello\",\",\",\"Ġworld\",\"!\"]}\n");
}

TEST(DataCli, TokenizeAcceptsMegatronTokenizerNames) {
  test_support::TempDir dir;
  const auto input = dir.write("in.jsonl", "{\"body\": \"Hello, world!\"}\n");
  const auto r = run_megatron(
      "tokenize --tokenizer-type BertWordPieceLowerCase --vocab-file "
      "data/tokenizers/bert-base-uncased/vocab.txt --json-key body --input " + input.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"ids\":[7592,1010,2088,999]}\n");
}

TEST(DataCli, PreprocessInspectAndMergeTheBundledCorpus) {
  test_support::TempDir dir;
  const std::string prefix = (dir.path() / "austen").string();
  const auto pre = run_megatron("preprocess --input data/corpora/austen.jsonl --output-prefix " +
                                prefix + kGpt2 + " --append-eod --workers 2 --quiet");
  ASSERT_EQ(pre.exit_code, 0) << pre.err;
  EXPECT_THAT(pre.out, StartsWith("preprocessed 270 documents (0 skipped), "));
  EXPECT_THAT(pre.out, HasSubstr("wrote " + prefix + "_text_document.bin and "));

  const auto inspect = run_megatron("data inspect " + prefix + "_text_document" + kGpt2);
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_THAT(inspect.out, HasSubstr("token type  uint16 (2 bytes)\ndocuments   270\nsequences   270\n"));
  EXPECT_THAT(inspect.out, HasSubstr("first document:\nEmma Woodhouse, handsome, clever, and rich"));

  const auto merge = run_megatron("data merge " + prefix + "2 " + prefix + "_text_document " +
                                  prefix + "_text_document");
  ASSERT_EQ(merge.exit_code, 0) << merge.err;
  EXPECT_THAT(merge.out, StartsWith("merged 2 datasets: 540 documents, 540 sequences"));
}

TEST(DataCli, PreprocessIntoAnUnwritableDirectoryNamesTheOutputAndExitsTwo) {
  const auto r = run_megatron(
      "preprocess --input data/corpora/austen.jsonl --output-prefix /proc/megatron-out --quiet "
      "--tokenizer bert-wordpiece-lowercase --vocab-file data/tokenizers/bert-base-uncased/vocab.txt");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("cannot write the dataset /proc/megatron-out_text_document in '/proc'"),
            std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(".tmp-"), std::string::npos) << r.err;  // no internal file names
}

TEST(DataCli, UnknownTokenizerSuggestsTheClosest) {
  test_support::TempDir dir;
  const auto input = dir.write("in.jsonl", "{\"text\": \"x\"}\n");
  const auto r = run_megatron("tokenize --tokenizer gpt2bpe --input " + input.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, StartsWith("megatron: error: unknown tokenizer 'gpt2bpe' (did you mean gpt2-bpe?)"));
}

TEST(DataCli, PreprocessBadLineIsOneErrorLineAndExitCode2) {
  test_support::TempDir dir;
  const auto input = dir.write("bad.jsonl", "{\"text\": \"fine\"}\n{\"txt\": \"oops\"}\n");
  const auto r = run_megatron("preprocess --quiet --input " + input.string() + " --output-prefix " +
                              (dir.path() / "out").string() + kGpt2);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "megatron: error: " + input.string() +
                       ":2: no key 'text' (keys: txt); fix the line or pass --skip-bad-lines\n");
}

TEST(DataCli, MissingVocabularyFileIsNamed) {
  test_support::TempDir dir;
  const auto input = dir.write("in.jsonl", "{\"text\": \"x\"}\n");
  const auto r = run_megatron("tokenize --tokenizer gpt2-bpe --vocab-file nope.json --merge-file "
                              "data/tokenizers/gpt2/merges.txt --input " + input.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("nope.json"));
}

// A dataset of one document made by hand (two uint16 tokens), with `length` as its length.
std::string hand_made_dataset(const test_support::TempDir& dir, int32_t length) {
  const std::string prefix = (dir.path() / "ds").string();
  data::test_files::write(prefix + ".idx", data::test_files::idx_bytes(8, 1, 2, {length}, {0}, {0, 1}));
  data::test_files::write(prefix + ".bin", std::string(4, '\x01'));
  return prefix;
}

TEST(DataCli, InspectOfACorruptIndexIsOneErrorLineAndExitCode2) {
  test_support::TempDir dir;
  const std::string prefix = hand_made_dataset(dir, -2000000000);
  const auto r = run_megatron("data inspect " + prefix);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "megatron: error: '" + prefix +
                       ".idx' is corrupt: sequence 0 has length -2000000000, expected a token count "
                       ">= 0; re-make the dataset with `megatron preprocess`\n");
}

TEST(DataCli, MergeRefusesToReplaceAnExistingDatasetWithoutForce) {
  test_support::TempDir dir;
  const std::string in = hand_made_dataset(dir, 2);
  const std::string out = (dir.path() / "out").string();
  dir.write("out.idx", "existing");
  const auto r = run_megatron("data merge " + out + " " + in);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "megatron: error: '" + out + ".idx' already exists; pass --force to replace it\n");
  EXPECT_EQ(test_support::slurp(out + ".idx"), "existing");
  EXPECT_FALSE(std::filesystem::exists(out + ".bin"));
}

TEST(DataCli, MergeWithForceReplacesAnExistingDataset) {
  test_support::TempDir dir;
  const std::string in = hand_made_dataset(dir, 2);
  const std::string out = (dir.path() / "out").string();
  dir.write("out.idx", "existing");
  const auto r = run_megatron("data merge --force " + out + " " + in);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test_support::slurp(out + ".bin"), std::string(4, '\x01'));
}

TEST(DataCli, PreprocessWithMoreWorkersThanTheMachineCanRunIsRefusedAndLeavesNothing) {
  test_support::TempDir dir;
  const auto input = dir.write("in.jsonl", "{\"text\": \"x\"}\n");
  const auto r = run_megatron("preprocess --quiet --workers 100000 --input " + input.string() +
                              " --output-prefix " + (dir.path() / "out").string() + kGpt2);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, StartsWith("megatron: error: --workers 100000: more threads than this machine"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);  // the input
}

}  // namespace data_cli_test
}  // namespace megatron::cli
