// The split string "969,30,1" as Megatron-Core applies it: normalised fractions, then
// cumulative bounds rounded half-to-even over the documents.
#include "data/dataset_split.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"

namespace megatron::data {
namespace {

using Ranges = std::array<std::optional<DocumentRange>, 3>;

TEST(SplitRanges, DefaultSplitOfAThousandDocuments) {
  EXPECT_EQ(split_document_ranges("969,30,1", 1000),
            (Ranges{DocumentRange{0, 969}, DocumentRange{969, 999}, DocumentRange{999, 1000}}));
}

TEST(SplitRanges, MissingPartsAreZeroAndAZeroShareHasNoRange) {
  EXPECT_EQ(split_document_ranges("99,1", 1000),
            (Ranges{DocumentRange{0, 990}, DocumentRange{990, 1000}, std::nullopt}));
  EXPECT_EQ(split_document_ranges("100,0,0", 7),
            (Ranges{DocumentRange{0, 7}, std::nullopt, std::nullopt}));
}

TEST(SplitRanges, BoundsAreRoundedCumulativeFractions) {
  // 10/3 = 3.33 -> 3, 20/3 = 6.67 -> 7: rounding each bound, not each size.
  EXPECT_EQ(split_document_ranges("1,1,1", 10),
            (Ranges{DocumentRange{0, 3}, DocumentRange{3, 7}, DocumentRange{7, 10}}));
}

TEST(SplitRanges, HalvesRoundToEvenAsPythonDoes) {
  EXPECT_EQ(split_document_ranges("1,1", 5)[0], (DocumentRange{0, 2}));  // 2.5 -> 2
  EXPECT_EQ(split_document_ranges("1,1", 7)[0], (DocumentRange{0, 4}));  // 3.5 -> 4
}

TEST(SplitRanges, APositiveShareCanBeEmptyOnASmallDataset) {
  EXPECT_EQ(split_document_ranges("969,30,1", 100)[2], (DocumentRange{100, 100}));
}

TEST(SplitRanges, RangesTileAllDocumentsForManySplitsAndSizes) {
  for (const char* split : {"969,30,1", "98,2,0", "1,1,1", "0.8,0.1,0.1", "0,1,0", "3,0,7"}) {
    for (const int64_t n : {0, 1, 2, 3, 10, 99, 1000, 123457}) {
      int64_t next = 0;
      for (const auto& range : split_document_ranges(split, n)) {
        if (!range) continue;
        EXPECT_EQ(range->begin, next) << split << " over " << n;
        EXPECT_LE(range->begin, range->end) << split << " over " << n;
        next = range->end;
      }
      EXPECT_EQ(next, n) << split;
    }
  }
}

TEST(SplitRanges, ParseNormalisesByTheSum) {
  const auto f = parse_split(" 969, 30 ,1");
  EXPECT_DOUBLE_EQ(f[0], 0.969);
  EXPECT_DOUBLE_EQ(f[1], 0.030);
  EXPECT_DOUBLE_EQ(f[2], 0.001);
  EXPECT_EQ(parse_split("2"), (std::array<double, 3>{1.0, 0.0, 0.0}));
}

TEST(SplitRanges, MalformedStringsAreUserErrorsThatQuoteThem) {
  for (const char* bad : {"", "a,b", "1,2,3,4", "0,0,0", "-1,2", "1,,2", "nan"}) {
    try {
      parse_split(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace megatron::data
