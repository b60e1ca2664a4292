// Megatron's indexed format, byte for byte: the writer's files, the reader's checks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "data/indexed_dataset.hpp"
#include "support/bytes.hpp"
#include "support/temp_dir.hpp"

namespace megatron::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using test_support::little_endian;
using test_support::slurp;

TEST(IndexedDataset, TokenTypeIsUint16BelowMegatrons65500Threshold) {
  EXPECT_EQ(optimal_token_type(50257), TokenType::U16);
  EXPECT_EQ(optimal_token_type(65499), TokenType::U16);
  EXPECT_EQ(optimal_token_type(65500), TokenType::I32);
}

TEST(IndexedDataset, WriterProducesMegatronsBytesExactly) {
  test_support::TempDir dir;
  const std::string prefix = (dir.path() / "ds").string();
  IndexedDatasetWriter w(prefix, TokenType::U16);
  // Document 1: two sentences; document 2: one; document 3: empty.
  const std::vector<int32_t> a{5, 6, 7}, b{8}, c{65535, 0};
  w.add_sequence(a);
  w.add_sequence(b);
  w.end_document();
  w.add_sequence(c);
  w.end_document();
  w.end_document();
  w.finish();

  const std::string idx = std::string("MMIDIDX\0\0", 9) + little_endian<uint64_t>({1}) + std::string(1, '\x08') +
                          little_endian<uint64_t>({3}) + little_endian<uint64_t>({4}) + little_endian<int32_t>({3, 1, 2}) +
                          little_endian<int64_t>({0, 6, 8}) + little_endian<int64_t>({0, 2, 3, 3});
  EXPECT_EQ(slurp(prefix + ".idx"), idx);
  EXPECT_EQ(slurp(prefix + ".bin"), little_endian<uint16_t>({5, 6, 7, 8, 65535, 0}));
}

TEST(IndexedDataset, Int32DatasetsUseFourBytesPerToken) {
  test_support::TempDir dir;
  const std::string prefix = (dir.path() / "wide").string();
  IndexedDatasetWriter w(prefix, TokenType::I32);
  const std::vector<int32_t> t{70000, 1};
  w.add_sequence(t);
  w.end_document();
  w.finish();
  EXPECT_EQ(slurp(prefix + ".bin"), little_endian<int32_t>({70000, 1}));
  const IndexedDataset ds(prefix);
  EXPECT_EQ(ds.token_type(), TokenType::I32);
  EXPECT_THAT(ds.tokens(0), ElementsAre(70000, 1));
}

TEST(IndexedDataset, ReaderSeesWhatTheWriterWrote) {
  test_support::TempDir dir;
  const std::string prefix = (dir.path() / "ds").string();
  IndexedDatasetWriter w(prefix, TokenType::U16);
  const std::vector<int32_t> a{1, 2, 3}, b{4, 5};
  w.add_sequence(a);
  w.end_document();
  w.add_sequence(b);
  w.end_document();
  w.finish();
  const IndexedDataset ds(prefix);
  EXPECT_EQ(ds.sequences(), 2);
  EXPECT_EQ(ds.documents(), 2);
  EXPECT_EQ(ds.total_tokens(), 5);
  EXPECT_THAT(ds.tokens(1), ElementsAre(4, 5));
  EXPECT_THAT(ds.tokens(0, 1, 2), ElementsAre(2, 3));
  EXPECT_THAT(ds.document_indices(), ElementsAre(0, 1, 2));
}

TEST(IndexedDataset, NothingAppearsUnderTheFinalNameUntilFinish) {
  test_support::TempDir dir;
  const std::string prefix = (dir.path() / "ds").string();
  {
    IndexedDatasetWriter w(prefix, TokenType::U16);
    const std::vector<int32_t> a{1};
    w.add_sequence(a);
    w.end_document();
    EXPECT_FALSE(std::filesystem::exists(prefix + ".bin"));
    EXPECT_FALSE(std::filesystem::exists(prefix + ".idx"));
  }  // abandoned: its temporary files go too
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(IndexedDataset, AWriterThatCannotOpenAllItsFilesLeavesNoneBehind) {
  test_support::TempDir dir;
  const std::string prefix = (dir.path() / "ds").string();
  // A directory where the writer's third temporary file goes makes its fopen fail.
  const auto blocker = dir.path() / fmt::format("ds.idx.tmp-{}.docs", ::getpid());
  std::filesystem::create_directory(blocker);
  EXPECT_THROW(IndexedDatasetWriter(prefix, TokenType::U16), RuntimeFailure);
  std::filesystem::remove(blocker);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(IndexedDataset, TokenTooLargeForUint16IsAnError) {
  test_support::TempDir dir;
  IndexedDatasetWriter w((dir.path() / "ds").string(), TokenType::U16);
  const std::vector<int32_t> big{70000};
  EXPECT_THROW(w.add_sequence(big), RuntimeFailure);
}

TEST(IndexedDataset, MergeConcatenatesSequencesAndDocuments) {
  test_support::TempDir dir;
  auto make = [&](const std::string& name, std::vector<std::vector<int32_t>> docs) {
    const std::string prefix = (dir.path() / name).string();
    IndexedDatasetWriter w(prefix, TokenType::U16);
    for (const auto& d : docs) {
      w.add_sequence(d);
      w.end_document();
    }
    w.finish();
    return prefix;
  };
  const IndexedDataset a(make("a", {{1, 2}, {3}})), b(make("b", {{4, 5, 6}}));
  const std::string out = (dir.path() / "ab").string();
  IndexedDatasetWriter w(out, TokenType::U16);
  w.add_dataset(a);
  w.add_dataset(b);
  w.finish();
  const IndexedDataset ab(out);
  EXPECT_THAT(ab.document_indices(), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(ab.tokens(2), ElementsAre(4, 5, 6));
}

TEST(IndexedDataset, MissingIndexIsNamed) {
  test_support::TempDir dir;
  try {
    IndexedDataset ds((dir.path() / "none").string());
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("none.idx' does not exist"));
  }
}

TEST(IndexedDataset, WrongMagicTruncatedIndexAndShortBinAreRejected) {
  test_support::TempDir dir;
  const std::string prefix = (dir.path() / "ds").string();
  IndexedDatasetWriter w(prefix, TokenType::U16);
  const std::vector<int32_t> a{1, 2, 3};
  w.add_sequence(a);
  w.end_document();
  w.finish();
  const std::string idx = slurp(prefix + ".idx"), bin = slurp(prefix + ".bin");
  auto message = [&](const std::string& idx_bytes, const std::string& bin_bytes) {
    std::ofstream(prefix + ".idx", std::ios::binary) << idx_bytes;
    std::ofstream(prefix + ".bin", std::ios::binary) << bin_bytes;
    try {
      IndexedDataset ds(prefix);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_THAT(message("XX" + idx.substr(2), bin), HasSubstr("the magic is not MMIDIDX"));
  EXPECT_THAT(message(idx.substr(0, idx.size() - 3), bin), HasSubstr("sequences and 2 document indices need"));
  EXPECT_THAT(message(idx, bin.substr(0, 4)), HasSubstr("has 4 bytes but its index describes 6: the dataset is corrupt"));
}

}  // namespace
}  // namespace megatron::data
