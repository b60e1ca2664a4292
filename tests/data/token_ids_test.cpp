// The whole-dataset check of token ids against a vocabulary, for each token type: what passes,
// and the error that names the dataset, the sequence, the id and the vocabulary size.
#include "data/token_ids.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "data/gpt_dataset_builder.hpp"
#include "data/indexed_dataset.hpp"
#include "data/indexed_files.hpp"
#include "support/temp_dir.hpp"

namespace megatron::data {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string check_error(const std::string& prefix, int64_t vocab_size) {
  try {
    check_token_ids(IndexedDataset(prefix), vocab_size);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(TokenIds, IdsInsideTheVocabularyPassForEveryTokenType) {
  test_support::TempDir dir;
  const std::string p = (dir.path() / "ds").string();
  test_files::write_dataset<uint8_t>(p + "u8", 1, {{0, 9}});
  test_files::write_dataset<int8_t>(p + "i8", 2, {{0, 9}});
  test_files::write_dataset<int16_t>(p + "i16", 3, {{0, 9}});
  test_files::write_dataset<int32_t>(p + "i32", 4, {{0, 9}});
  test_files::write_dataset<int64_t>(p + "i64", 5, {{0, 9}});
  test_files::write_dataset<uint16_t>(p + "u16", 8, {{0, 9}});
  for (const char* type : {"u8", "i8", "i16", "i32", "i64", "u16"})
    EXPECT_EQ(check_error(p + type, 10), "") << type;
}

TEST(TokenIds, AnIdAtTheVocabularySizeNamesTheDatasetSequenceIdAndSize) {
  test_support::TempDir dir;
  const std::string prefix = (dir.path() / "ds").string();
  test_files::write_dataset<uint16_t>(prefix, 8, {{1, 2}, {}, {3, 4}, {5, 10, 6}});
  EXPECT_THAT(check_error(prefix, 10),
              AllOf(HasSubstr("dataset '" + prefix + "': sequence 3 holds token id 10"),
                    HasSubstr("vocabulary of 10 ids (model.vocab_size)"),
                    HasSubstr("made with another tokenizer")));
}

TEST(TokenIds, ANegativeIdIsOutsideTheVocabularyEvenWhenItsBitsWouldFit) {
  // int8 -1 is the byte 0xFF = 255, inside a 300-id vocabulary if read as unsigned.
  test_support::TempDir dir;
  const std::string prefix = (dir.path() / "ds").string();
  test_files::write_dataset<int8_t>(prefix, 2, {{1, -1}});
  EXPECT_THAT(check_error(prefix, 300), HasSubstr("sequence 0 holds token id -1"));
}

TEST(TokenIds, AnInt64IdBeyondInt32IsOutsideTheVocabulary) {
  test_support::TempDir dir;
  const std::string prefix = (dir.path() / "ds").string();
  test_files::write_dataset<int64_t>(prefix, 5, {{1}, {int64_t{1} << 40}});
  EXPECT_THAT(check_error(prefix, 50257), HasSubstr("sequence 1 holds token id 1099511627776"));
}

TEST(TokenIds, BuildingTheTrainingDatasetsChecksEveryIdBeforeAnyIndexIsBuilt) {
  test_support::TempDir dir;
  const std::string prefix = (dir.path() / "ds").string();
  std::vector<std::vector<uint16_t>> docs(100, std::vector<uint16_t>{1, 2, 3, 4});
  docs.back().back() = 60000;  // in the last document: no sample draws it before the end
  test_files::write_dataset<uint16_t>(prefix, 8, docs);
  BlendSpec spec{.prefixes = {prefix}, .split = "1,0,0", .vocab_size = 50257};
  GptDatasetConfig config{.seq_length = 4, .cache_dir = dir.path() / "cache"};
  try {
    build_gpt_datasets(spec, {8, std::nullopt, std::nullopt}, config);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("sequence 99 holds token id 60000"));
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "cache"));
}

}  // namespace
}  // namespace megatron::data
