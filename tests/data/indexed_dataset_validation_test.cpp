// Every class of corrupt .idx/.bin the reader refuses at open, each built byte by byte: the
// error names the file, the entry and the value, and says how to fix it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

#include "core/error.hpp"
#include "data/indexed_dataset.hpp"
#include "data/indexed_files.hpp"
#include "support/bytes.hpp"
#include "support/temp_dir.hpp"

namespace megatron::data {
namespace {

using test_files::idx_bytes;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr uint8_t kU16 = 8;
constexpr const char* kRemake = "; re-make the dataset with `megatron preprocess`";

class CorruptIndex : public ::testing::Test {
 protected:
  // Opens a dataset made of these bytes and returns the UserError's message ("" if it opened).
  std::string open_error(const std::string& idx, const std::string& bin) {
    test_files::write(prefix_ + ".idx", idx);
    test_files::write(prefix_ + ".bin", bin);
    try {
      IndexedDataset ds(prefix_);
    } catch (const UserError& e) {
      return e.what();
    }
    return "";
  }
  // Two uint16 sequences of 3 and 1 tokens, two documents, as the writer makes them.
  std::string good_bin() const { return test_support::little_endian<uint16_t>({1, 2, 3, 4}); }

  test_support::TempDir dir_;
  std::string prefix_ = (dir_.path() / "ds").string();
};

TEST_F(CorruptIndex, AWellFormedHandMadeIndexOpens) {
  EXPECT_EQ(open_error(idx_bytes(kU16, 2, 3, {3, 1}, {0, 6}, {0, 1, 2}), good_bin()), "");
}

TEST_F(CorruptIndex, HeaderCountsWhoseSizeOverflows64BitsAreRejectedBeforeAllocating) {
  // 2^62 sequences x 12 bytes wraps to 0 in 64 bits: a wrapped check would accept this header
  // and then try to allocate 2^64 bytes of lengths.
  const uint64_t n = uint64_t{1} << 62;
  EXPECT_THAT(open_error(idx_bytes(kU16, n, 1, {}, {}, {0}), ""),
              AllOf(HasSubstr("ds.idx' is corrupt"), HasSubstr("4611686018427387904 sequences"),
                    HasSubstr("need more than that"), HasSubstr(kRemake)));
}

TEST_F(CorruptIndex, ZeroDocumentIndicesAreRejected) {
  EXPECT_THAT(open_error(idx_bytes(kU16, 0, 0, {}, {}, {}), ""),
              AllOf(HasSubstr("0 document indices, expected at least 1"), HasSubstr(kRemake)));
}

TEST_F(CorruptIndex, ANegativeSequenceLengthIsRejected) {
  EXPECT_THAT(open_error(idx_bytes(kU16, 2, 3, {3, -5}, {0, 6}, {0, 1, 2}), good_bin()),
              AllOf(HasSubstr("ds.idx' is corrupt: sequence 1 has length -5, expected a token "
                              "count >= 0"),
                    HasSubstr(kRemake)));
}

TEST_F(CorruptIndex, AFirstOffsetOtherThanZeroIsRejected) {
  EXPECT_THAT(open_error(idx_bytes(kU16, 2, 3, {3, 1}, {-1000000, 6}, {0, 1, 2}), good_bin()),
              HasSubstr("sequence 0 starts at byte -1000000 of the .bin, expected 0; re-make"));
}

TEST_F(CorruptIndex, AnOffsetThatDoesNotFollowThePreviousSequenceIsRejected) {
  const int64_t huge = std::numeric_limits<int64_t>::max();
  EXPECT_THAT(open_error(idx_bytes(kU16, 2, 3, {3, 1}, {0, huge}, {0, 1, 2}), good_bin()),
              HasSubstr("sequence 1 starts at byte 9223372036854775807 of the .bin, expected 6 "
                        "(where sequence 0 ends)"));
}

TEST_F(CorruptIndex, LengthsThatRunPastTheBinAreRejected) {
  EXPECT_THAT(
      open_error(idx_bytes(kU16, 3, 4, {3, 2000000000, 1}, {0, 6, 4000000006}, {0, 1, 2, 3}),
                 good_bin()),
      AllOf(HasSubstr("ds.bin' has 8 bytes but its index describes at least 4000000006"),
            HasSubstr(kRemake)));
}

TEST_F(CorruptIndex, ABinLongerThanTheIndexDescribesIsRejected) {
  EXPECT_THAT(open_error(idx_bytes(kU16, 2, 3, {3, 1}, {0, 6}, {0, 1, 2}), good_bin() + "xx"),
              HasSubstr("ds.bin' has 10 bytes but its index describes 8: the dataset is corrupt"));
}

TEST_F(CorruptIndex, ADocumentIndexNotStartingAtZeroIsRejected) {
  EXPECT_THAT(open_error(idx_bytes(kU16, 2, 3, {3, 1}, {0, 6}, {1, 1, 2}), good_bin()),
              AllOf(HasSubstr("ds.idx' is corrupt: document index 0 is 1, expected 0"),
                    HasSubstr(kRemake)));
}

TEST_F(CorruptIndex, ADecreasingDocumentIndexIsRejected) {
  EXPECT_THAT(open_error(idx_bytes(kU16, 2, 4, {3, 1}, {0, 6}, {0, 2, 1, 2}), good_bin()),
              HasSubstr("document index 2 is 1, below the previous 2"));
}

TEST_F(CorruptIndex, ADocumentIndexPastTheSequenceCountIsRejected) {
  EXPECT_THAT(open_error(idx_bytes(kU16, 2, 3, {3, 1}, {0, 6}, {0, 1, 7}), good_bin()),
              HasSubstr("document index 2 is 7, past the 2 sequences"));
}

TEST_F(CorruptIndex, ALastDocumentIndexShortOfTheSequenceCountIsRejected) {
  EXPECT_THAT(open_error(idx_bytes(kU16, 2, 2, {3, 1}, {0, 6}, {0, 1}), good_bin()),
              HasSubstr("the last document index (1) is 1, expected the sequence count 2"));
}

TEST_F(CorruptIndex, FloatDatasetsAreRefusedAsNotHoldingTokenIds) {
  EXPECT_THAT(open_error(idx_bytes(7, 1, 2, {1}, {0}, {0, 1}), std::string(4, '\0')),
              HasSubstr("ds.idx' holds float32 values (dtype code 7), not token ids"));
  EXPECT_THAT(open_error(idx_bytes(6, 1, 2, {1}, {0}, {0, 1}), std::string(8, '\0')),
              HasSubstr("holds float64 values (dtype code 6)"));
}

TEST_F(CorruptIndex, AnIndexThatIsADirectoryIsNamed) {
  std::filesystem::create_directory(prefix_ + ".idx");
  try {
    IndexedDataset ds(prefix_);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("ds.idx' is not a regular file"));
  }
}

TEST(IndexedDatasetTokens, AnInt64IdBeyondInt32IsAnErrorNotCutToFit) {
  test_support::TempDir dir;
  const std::string prefix = (dir.path() / "wide").string();
  test_files::write_dataset<int64_t>(prefix, 5, {{1, 2}, {3, int64_t{1} << 32}});
  const IndexedDataset ds(prefix);
  EXPECT_EQ(ds.tokens(0), (std::vector<int32_t>{1, 2}));
  try {
    ds.tokens(1);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("wide': sequence 1 holds token id 4294967296"));
  }
}

}  // namespace
}  // namespace megatron::data
