// data inspect and data merge as calls: the token statistics a user reads, and the merge's
// refusal to replace a dataset it was not told to.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "data/dataset_inspect_job.hpp"
#include "data/dataset_merge_job.hpp"
#include "data/indexed_dataset.hpp"
#include "support/temp_dir.hpp"
#include "support/user_error.hpp"

namespace megatron::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// One document per sequence of `sequences`, as int32 tokens.
std::string write_dataset(const test_support::TempDir& dir, const std::string& name,
                          const std::vector<std::vector<int32_t>>& sequences) {
  const std::string prefix = (dir.path() / name).string();
  IndexedDatasetWriter w(prefix, TokenType::I32);
  for (const auto& s : sequences) {
    w.add_sequence(s);
    w.end_document();
  }
  w.finish();
  return prefix;
}

TEST(TokenStats, MostFrequentIdsComeFirstAndTiesGoToTheLowerId) {
  test_support::TempDir dir;
  const IndexedDataset ds(write_dataset(dir, "ds", {{7, 3, 3}, {5, 7, 3, 9}}));
  const TokenStats s = token_stats(ds);
  EXPECT_EQ(s.tokens, 7);
  EXPECT_EQ(s.shortest, 3);
  EXPECT_EQ(s.longest, 4);
  EXPECT_EQ(s.distinct, 4);
  EXPECT_THAT(s.most_frequent, ElementsAre(Pair(3, 3), Pair(7, 2), Pair(5, 1), Pair(9, 1)));
}

TEST(TokenStats, IdsOutsideTheCountedRangeAreTalliedWithoutASlotEach) {
  test_support::TempDir dir;
  const IndexedDataset ds(write_dataset(dir, "ds", {{-4, 1, kCountedIds, 2'000'000'000}}));
  const TokenStats s = token_stats(ds);
  EXPECT_EQ(s.negative, 1);
  EXPECT_EQ(s.huge, 2);
  EXPECT_EQ(s.distinct, 1);
  EXPECT_EQ(s.min_id, -4);
  EXPECT_EQ(s.max_id, 2'000'000'000);
}

TEST(InspectDataset, DecodesTheFirstDocumentOnlyWhenATokenizerIsGiven) {
  test_support::TempDir dir;
  const std::string prefix = write_dataset(dir, "ds", {{1, 2}});
  std::ostringstream out;
  inspect_dataset({.prefix = prefix}, out);
  EXPECT_THAT(out.str(), HasSubstr("most frequent 1:1 2:1\n"));
  EXPECT_THAT(out.str(), ::testing::Not(HasSubstr("first document")));
}

TEST(MergeDatasets, RefusesAnExistingOutputWithoutForce) {
  test_support::TempDir dir;
  const std::string a = write_dataset(dir, "a", {{1}});
  const std::string out = write_dataset(dir, "out", {{2}});
  std::ostringstream report;
  EXPECT_THAT(
      test_support::user_error_of([&] { merge_datasets({.output = out, .inputs = {a}}, report); }),
      HasSubstr("already exists; pass --force to replace it"));
  merge_datasets({.output = out, .inputs = {a, a}, .force = true}, report);
  EXPECT_EQ(IndexedDataset(out).documents(), 2);
}

}  // namespace
}  // namespace megatron::data
