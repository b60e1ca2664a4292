// GptDataset over real (tiny) indexed datasets: windows across documents, coverage of an epoch,
// index caching (reuse, rebuild of damaged files) and exact resumption at any sample.
#include "data/gpt_dataset.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "core/error.hpp"
#include "data/gpt_index_cache.hpp"
#include "gpt_test_data.hpp"

namespace megatron::data {
namespace gpt_dataset_test {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

GptDatasetConfig config_in(const test_support::TempDir& dir, int64_t seq_length,
                           uint64_t seed = 1234) {
  return {.seq_length = seq_length, .seed = seed, .cache_dir = dir.path() / "cache"};
}

TEST(GptDatasetWindows, OneDocumentIsCutIntoOverlappingWindows) {
  test_support::TempDir dir;
  const auto data = open_dataset(write_documents(dir, "one", {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}));
  const GptDataset ds(data, Split::Train, {0, 1}, std::nullopt, config_in(dir, 3));
  ASSERT_EQ(ds.size(), 3);  // (10 - 1) / 3
  std::vector<std::vector<int32_t>> windows;
  for (int64_t i = 0; i < ds.size(); ++i) windows.push_back(ds.window(i));
  EXPECT_THAT(windows, UnorderedElementsAre(ElementsAre(1, 2, 3, 4), ElementsAre(4, 5, 6, 7),
                                            ElementsAre(7, 8, 9, 10)));
}

TEST(GptDatasetWindows, WindowsCrossDocumentBoundariesInDocumentIndexOrder) {
  test_support::TempDir dir;
  // Tokens name their place: d0 = 1 2 3, d1 = 4 5 6 7 8, d2 = 9 10.
  const auto data = open_dataset(write_documents(dir, "three", numbered_documents({3, 5, 2})));
  const GptDataset ds(data, Split::Train, {0, 3}, std::nullopt, config_in(dir, 4));
  std::vector<int32_t> flat;
  for (const int64_t d : ds.indices().document_index) {
    const auto t = data->tokens(d);
    flat.insert(flat.end(), t.begin(), t.end());
  }
  ASSERT_EQ(ds.size(), 2);  // (10 - 1) / 4
  std::vector<std::vector<int32_t>> expected, windows;
  for (int64_t k = 0; k < 2; ++k)
    expected.emplace_back(flat.begin() + 4 * k, flat.begin() + 4 * k + 5);
  for (int64_t i = 0; i < 2; ++i) windows.push_back(ds.window(i));
  std::sort(expected.begin(), expected.end());
  std::sort(windows.begin(), windows.end());
  EXPECT_EQ(windows, expected);
}

TEST(GptDatasetWindows, LabelsAreTokensShiftedByOne) {
  test_support::TempDir dir;
  const auto data = open_dataset(write_documents(dir, "d", numbered_documents({7, 4, 9})));
  const GptDataset ds(data, Split::Train, {0, 3}, 5, config_in(dir, 4));
  for (int64_t i = 0; i < ds.size(); ++i) {
    const Sample s = ds.sample(i);
    const auto w = ds.window(i);
    EXPECT_EQ(s.tokens, std::vector<int32_t>(w.begin(), w.end() - 1));
    EXPECT_EQ(s.labels, std::vector<int32_t>(w.begin() + 1, w.end()));
  }
}

TEST(GptDatasetCoverage, OneEpochServesEveryTokenOnceExceptTheShortTail) {
  test_support::TempDir dir;
  const std::vector<int> lengths{13, 1, 7, 22, 5, 9, 30, 2, 11};  // 100 tokens
  const auto data = open_dataset(write_documents(dir, "d", numbered_documents(lengths)));
  const GptDataset ds(data, Split::Train, {0, 9}, std::nullopt, config_in(dir, 8));
  ASSERT_EQ(ds.size(), 12);  // (100 - 1) / 8
  // The inputs of sample k are flat positions [8k, 8k + 8): disjoint, 96 tokens in all.
  std::map<int32_t, int> seen;
  for (int64_t i = 0; i < ds.size(); ++i)
    for (const int32_t t : ds.sample(i).tokens) ++seen[t];
  EXPECT_EQ(seen.size(), 96u);
  for (const auto& [token, count] : seen) EXPECT_EQ(count, 1) << token;
}

TEST(GptDatasetCoverage, SeveralEpochsServeEveryTokenOncePerEpoch) {
  test_support::TempDir dir;
  const auto data = open_dataset(write_documents(dir, "d", numbered_documents({6, 3, 8, 4})));
  // 21 tokens per epoch, S = 5, 30 samples need 151 tokens: 8 epochs, 168 tokens, 33 samples.
  const GptDataset ds(data, Split::Train, {0, 4}, 30, config_in(dir, 5));
  ASSERT_EQ(ds.indices().plan.num_epochs, 8);
  ASSERT_EQ(ds.size(), 33);
  std::map<int32_t, int> seen;
  for (int64_t i = 0; i < ds.size(); ++i)
    for (const int32_t t : ds.sample(i).tokens) ++seen[t];
  // 165 of the 168 tokens are inputs: all 21 tokens 8 times, less a tail of 3 of them once.
  int short_by_one = 0;
  for (int32_t t = 1; t <= 21; ++t) {
    EXPECT_TRUE(seen[t] == 8 || seen[t] == 7) << t;
    short_by_one += seen[t] == 7;
  }
  EXPECT_EQ(short_by_one, 3);
}

TEST(GptDatasetCoverage, ASplitOnlySeesItsOwnDocuments) {
  test_support::TempDir dir;
  const auto data = open_dataset(write_documents(dir, "d", numbered_documents({4, 4, 4, 4, 4})));
  const GptDataset ds(data, Split::Valid, {2, 4}, 6, config_in(dir, 3));
  for (int64_t i = 0; i < ds.size(); ++i)
    for (const int32_t t : ds.window(i)) EXPECT_TRUE(t >= 9 && t <= 16) << t;
}

TEST(GptDatasetOrder, SameSeedSameOrderOtherSeedOtherOrder) {
  test_support::TempDir dir;
  const auto data =
      open_dataset(write_documents(dir, "d", numbered_documents(std::vector<int>(40, 9))));
  auto order = [&](uint64_t seed) {
    const GptDataset ds(data, Split::Train, {0, 40}, 100, config_in(dir, 8, seed));
    std::vector<std::vector<int32_t>> out;
    for (int64_t i = 0; i < ds.size(); ++i) out.push_back(ds.window(i));
    return out;
  };
  EXPECT_EQ(order(1), order(1));
  EXPECT_NE(order(1), order(2));
}

TEST(GptDatasetCache, TheSecondConstructionMapsTheFileTheFirstWrote) {
  test_support::TempDir dir;
  const auto data = open_dataset(write_documents(dir, "d", numbered_documents({5, 8, 3, 12})));
  const GptDataset first(data, Split::Train, {0, 4}, 10, config_in(dir, 4));
  EXPECT_TRUE(first.built_indices());
  ASSERT_TRUE(fs::exists(first.cache_path()));
  const auto written = fs::last_write_time(first.cache_path());

  const GptDataset second(data, Split::Train, {0, 4}, 10, config_in(dir, 4));
  EXPECT_FALSE(second.built_indices());
  EXPECT_EQ(second.cache_path(), first.cache_path());
  EXPECT_EQ(fs::last_write_time(second.cache_path()), written);
  for (int64_t i = 0; i < first.size(); ++i) EXPECT_EQ(second.window(i), first.window(i));
}

TEST(GptDatasetCache, TheFileIsNamedByDatasetSplitAndHashAndLeavesNoTemporaries) {
  test_support::TempDir dir;
  const auto data = open_dataset(write_documents(dir, "corpus", numbered_documents({5, 8})));
  const GptDataset ds(data, Split::Test, {0, 2}, 2, config_in(dir, 4));
  EXPECT_THAT(ds.cache_path().filename().string(),
              ::testing::MatchesRegex("corpus-test-[0-9a-f]{16}\\.gptidx"));
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir.path() / "cache"))
    names.insert(entry.path().filename().string());
  EXPECT_EQ(names, (std::set<std::string>{ds.cache_path().filename().string(),
                                          ds.cache_path().filename().string() + ".lock"}));
}

TEST(GptDatasetCache, ProcessesStartingTogetherBuildOnceAndShareTheFile) {
  // Threads stand in for ranks: each opens the lock file itself, so flock separates them as
  // it separates processes.
  test_support::TempDir dir;
  const auto data = open_dataset(write_documents(dir, "d", numbered_documents({50, 80, 30})));
  std::vector<int> built(4, 0);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 4; ++r)
    ranks.emplace_back([&, r] {
      built[r] = GptDataset(data, Split::Train, {0, 3}, 500, config_in(dir, 4)).built_indices();
    });
  for (auto& t : ranks) t.join();
  EXPECT_EQ(std::count(built.begin(), built.end(), 1), 1);
}

TEST(GptDatasetCache, AnyChangedInputGetsItsOwnFile) {
  test_support::TempDir dir;
  const auto data = open_dataset(write_documents(dir, "d", numbered_documents({5, 8, 3, 12})));
  const auto path = [&](Split split, DocumentRange docs, std::optional<int64_t> n, int64_t s,
                        uint64_t seed) {
    return GptDataset(data, split, docs, n, config_in(dir, s, seed)).cache_path();
  };
  const fs::path base = path(Split::Train, {0, 4}, 10, 4, 1);
  EXPECT_NE(path(Split::Valid, {0, 4}, 10, 4, 1), base);
  EXPECT_NE(path(Split::Train, {1, 4}, 10, 4, 1), base);
  EXPECT_NE(path(Split::Train, {0, 4}, 11, 4, 1), base);
  EXPECT_NE(path(Split::Train, {0, 4}, std::nullopt, 4, 1), base);
  EXPECT_NE(path(Split::Train, {0, 4}, 10, 5, 1), base);
  EXPECT_NE(path(Split::Train, {0, 4}, 10, 4, 2), base);
  EXPECT_EQ(path(Split::Train, {0, 4}, 10, 4, 1), base);
}

TEST(GptDatasetCache, ARewrittenDatasetDoesNotReuseOldIndices) {
  test_support::TempDir dir;
  const std::string prefix = write_documents(dir, "d", numbered_documents({5, 8}));
  const fs::path before =
      GptDataset(open_dataset(prefix), Split::Train, {0, 2}, 3, config_in(dir, 4)).cache_path();
  write_documents(dir, "d", numbered_documents({5, 8, 6}));  // different .idx size
  const fs::path after =
      GptDataset(open_dataset(prefix), Split::Train, {0, 2}, 3, config_in(dir, 4)).cache_path();
  EXPECT_NE(before, after);
}

// Damages the cache file with `damage`, then checks that the next construction rebuilds it to
// the same indices. The first dataset is gone before the damage: it maps the file, and a file
// changed in place under a mapping is exactly what the atomic rename exists to prevent.
void expect_rebuilt_after(const std::function<void(const fs::path&)>& damage) {
  test_support::TempDir dir;
  const auto data = open_dataset(write_documents(dir, "d", numbered_documents({5, 8, 3, 12})));
  std::vector<std::vector<int32_t>> windows;
  fs::path path;
  {
    const GptDataset first(data, Split::Train, {0, 4}, 10, config_in(dir, 4));
    for (int64_t i = 0; i < first.size(); ++i) windows.push_back(first.window(i));
    path = first.cache_path();
  }
  const auto bytes = fs::file_size(path);
  damage(path);

  const GptDataset again(data, Split::Train, {0, 4}, 10, config_in(dir, 4));
  EXPECT_TRUE(again.built_indices());
  EXPECT_EQ(again.cache_path(), path);
  EXPECT_EQ(fs::file_size(path), bytes);
  ASSERT_EQ(again.size(), static_cast<int64_t>(windows.size()));
  for (int64_t i = 0; i < again.size(); ++i) EXPECT_EQ(again.window(i), windows[i]);
}

TEST(GptDatasetCache, ATruncatedFileIsRebuilt) {
  expect_rebuilt_after([](const fs::path& p) { fs::resize_file(p, fs::file_size(p) - 8); });
}

TEST(GptDatasetCache, AnEmptyFileIsRebuilt) {
  expect_rebuilt_after([](const fs::path& p) { fs::resize_file(p, 0); });
}

TEST(GptDatasetCache, AFileWithForeignBytesIsRebuilt) {
  expect_rebuilt_after([](const fs::path& p) {
    const auto size = fs::file_size(p);
    std::ofstream(p, std::ios::binary | std::ios::trunc) << std::string(size, 'x');
  });
}

TEST(GptDatasetCache, DamagedIndexValuesAreAnErrorNamingTheFileToDelete) {
  test_support::TempDir dir;
  const auto data = open_dataset(write_documents(dir, "d", numbered_documents({5, 8, 3, 12})));
  fs::path path;
  int64_t samples = 0;
  {
    const GptDataset ds(data, Split::Train, {0, 4}, 10, config_in(dir, 4));
    path = ds.cache_path();
    samples = ds.size();
  }
  // The shuffle index is the file's last array: overwrite it, leaving header and size intact.
  {
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(-8 * samples, std::ios::end);
    f << std::string(8 * samples, '\x7f');
  }
  const GptDataset ds(data, Split::Train, {0, 4}, 10, config_in(dir, 4));
  ASSERT_FALSE(ds.built_indices());
  try {
    ds.sample(0);
    FAIL() << "no error";
  } catch (const RuntimeFailure& e) {
    EXPECT_THAT(e.what(), HasSubstr(path.string()));
  }
}

TEST(GptDatasetCache, AnUncreatableCacheDirectoryIsAUserErrorNamingIt) {
  test_support::TempDir dir;
  const auto data = open_dataset(write_documents(dir, "d", numbered_documents({5, 8})));
  GptDatasetConfig config = config_in(dir, 4);
  config.cache_dir = dir.write("not-a-dir", "x") / "cache";
  try {
    GptDataset(data, Split::Train, {0, 2}, 2, config);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr(config.cache_dir.string()));
  }
}

TEST(GptDatasetCache, WithoutACacheDirectoryTheCacheSitsBesideTheData) {
  test_support::TempDir dir;
  const auto data = open_dataset(write_documents(dir, "d", numbered_documents({5, 8})));
  const GptDataset ds(data, Split::Train, {0, 2}, 2, {.seq_length = 4});
  EXPECT_EQ(ds.cache_path().parent_path(), fs::absolute(dir.path()) / "cache");
}

TEST(GptDatasetErrors, SamplesFromASplitWithoutTokensAreAUserError) {
  test_support::TempDir dir;
  const std::string prefix = write_documents(dir, "d", numbered_documents({5, 8}));
  try {
    GptDataset(open_dataset(prefix), Split::Test, {2, 2}, 4, config_in(dir, 4));
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr(prefix));
    EXPECT_THAT(e.what(), HasSubstr("test split"));
  }
}

TEST(GptDatasetErrors, DocumentsOutsideTheDatasetAreAUserError) {
  test_support::TempDir dir;
  const auto data = open_dataset(write_documents(dir, "d", numbered_documents({5, 8})));
  EXPECT_THROW(GptDataset(data, Split::Train, {0, 3}, 2, config_in(dir, 4)), UserError);
}

TEST(GptDatasetResume, SampleIIsTheSameFreshOrAfterIteratingUpToIt) {
  test_support::TempDir dir;
  const auto data = open_dataset(write_documents(dir, "d", numbered_documents({17, 3, 25, 9, 14})));
  std::vector<Sample> served;
  {
    const GptDataset ds(data, Split::Train, {0, 5}, 40, config_in(dir, 6));
    for (int64_t i = 0; i < ds.size(); ++i) served.push_back(ds.sample(i));
  }
  // A restarted run: indices mapped from the cache, reading starts mid-way, out of order.
  const GptDataset resumed(data, Split::Train, {0, 5}, 40, config_in(dir, 6));
  ASSERT_FALSE(resumed.built_indices());
  for (const int64_t i : {37, 5, 22, 0}) EXPECT_EQ(resumed.sample(i).tokens, served[i].tokens) << i;

  // And a run on another machine that builds the indices itself.
  test_support::TempDir elsewhere;
  const GptDataset rebuilt(data, Split::Train, {0, 5}, 40, config_in(elsewhere, 6));
  ASSERT_TRUE(rebuilt.built_indices());
  for (const int64_t i : {37, 5, 22, 0}) EXPECT_EQ(rebuilt.sample(i).labels, served[i].labels) << i;
}

}  // namespace gpt_dataset_test
}  // namespace megatron::data
