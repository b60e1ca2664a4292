// BertDataset over tiny sentence-split datasets: every sample and the sample index against an
// independent Python rewrite of Megatron-Core's BERT dataset (tests/data/
// reference_bert_samples.py), the sample layout, purity, caching and the refusals.
#include "data/bert_dataset.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.hpp"
#include "masked_test_data.hpp"
#include "support/temp_dir.hpp"

namespace megatron::data {
namespace {

using ::testing::HasSubstr;

BertDatasetConfig config_in(const test_support::TempDir& dir, int64_t seq_length,
                            bool binary_head = true) {
  auto continuation = std::make_shared<std::vector<bool>>();
  for (const auto& t : tiny_vocab()) continuation->push_back(t.rfind("##", 0) == 0);
  return {.seq_length = seq_length,
          .seed = 1234,
          .short_seq_prob = 0.1,
          .binary_head = binary_head,
          .masking = {.mask_prob = 0.15, .max_ngram = 3, .full_word = true, .cls = 2, .sep = 3,
                      .mask = 4, .vocab_size = 42},  // + [BOS] and [EOS], as Megatron
          .pad = 0,
          .continuation = continuation,
          .cache_dir = dir.path() / "cache"};
}

void expect_matches_reference(bool binary_head, int64_t seq_length) {
  if (!python_with_numpy()) GTEST_SKIP() << "NumPy is not installed for " << kPython;
  test_support::TempDir dir;
  const std::string prefix = write_sentences(dir, 3, 60);
  auto data = std::make_shared<const IndexedDataset>(prefix);
  const BertDatasetConfig config = config_in(dir, seq_length, binary_head);
  const BertDataset ds(data, Split::Train, {2, 55}, 400, config);
  ASSERT_GE(ds.size(), 400);
  nlohmann::json dump{{"prefix", prefix}, {"vocab", tiny_vocab()}, {"cls", 2}, {"sep", 3},
                      {"mask", 4}, {"pad", 0}, {"seq_length", seq_length}, {"seed", 1234},
                      {"short_seq_prob", 0.1}, {"mask_prob", 0.15}, {"max_ngram", 3},
                      {"full_word", true}, {"binary_head", binary_head},
                      {"documents", {2, 55}}, {"max_samples", 400}};
  nlohmann::json index = nlohmann::json::array();
  nlohmann::json samples = nlohmann::json::array();
  for (int64_t i = 0; i < 120; ++i) {
    const Sample s = ds.sample(i);
    std::vector<int32_t> labels(s.labels.size(), -1);
    for (size_t t = 0; t < labels.size(); ++t) {
      if (s.loss_mask[t] > 0.0f) labels[t] = s.labels[t];
    }
    samples.push_back({{"i", i}, {"tokens", s.tokens}, {"types", s.token_types},
                       {"labels", labels}, {"is_random", std::max(s.sentence_order, 0)},
                       {"valid_length", s.valid_length}});
  }
  for (int64_t i = 0; i < ds.size(); ++i) index.push_back(ds.index_entry(i));
  dump["index"] = index;
  dump["samples"] = samples;
  std::ofstream(dir.path() / "dump.json") << dump.dump();
  const std::string command = std::string(kPython) + " " + MEGATRON_SOURCE_DIR +
                              "/tests/data/reference_bert_samples.py " +
                              (dir.path() / "dump.json").string() + " > " +
                              (dir.path() / "report.txt").string() + " 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream report(dir.path() / "report.txt");
  EXPECT_EQ(status, 0) << std::string(std::istreambuf_iterator<char>(report), {});
}

TEST(BertDatasetAgainstReference, SamplesAndIndexAreMegatronsWithTheBinaryHead) {
  expect_matches_reference(true, 32);
}

TEST(BertDatasetAgainstReference, SamplesAndIndexAreMegatronsWithoutTheBinaryHead) {
  expect_matches_reference(false, 24);
}

TEST(BertDatasetLayout, ClsSegmentsSepsTypesAndPadding) {
  test_support::TempDir dir;
  auto data = std::make_shared<const IndexedDataset>(write_sentences(dir, 5, 30));
  const BertDataset ds(data, Split::Train, {0, 30}, 50, config_in(dir, 40));
  for (int64_t i = 0; i < 50; ++i) {
    const Sample s = ds.sample(i);
    ASSERT_EQ(s.tokens.size(), 40u);
    ASSERT_GE(s.valid_length, 5);
    EXPECT_EQ(s.tokens[0], 2) << "[CLS] first";
    EXPECT_EQ(s.tokens[size_t(s.valid_length - 1)], 3) << "[SEP] last";
    EXPECT_EQ(std::count(s.tokens.begin(), s.tokens.begin() + s.valid_length, 3), 2);
    for (size_t t = size_t(s.valid_length); t < 40; ++t) {
      EXPECT_EQ(s.tokens[t], 0);
      EXPECT_EQ(s.loss_mask[t], 0.0f);
    }
    EXPECT_EQ(s.token_types[0], 0);
    EXPECT_EQ(s.token_types[size_t(s.valid_length - 1)], 1);
    EXPECT_TRUE(s.sentence_order == 0 || s.sentence_order == 1);
    const double masked = std::count(s.loss_mask.begin(), s.loss_mask.end(), 1.0f);
    EXPECT_GE(masked, 1);
    EXPECT_LE(masked, 0.15 * 37 + 1e-9);
  }
}

TEST(BertDatasetPurity, ASampleIsTheSameWheneverAndWhereverItIsDrawn) {
  test_support::TempDir dir;
  const std::string prefix = write_sentences(dir, 7, 40);
  auto data = std::make_shared<const IndexedDataset>(prefix);
  const BertDataset first(data, Split::Train, {0, 40}, 80, config_in(dir, 32));
  EXPECT_TRUE(first.built_index());
  const BertDataset again(data, Split::Train, {0, 40}, 80, config_in(dir, 32));
  EXPECT_FALSE(again.built_index()) << "the second dataset loads the cached index";
  for (int64_t i : {int64_t(17), int64_t(0), int64_t(63), int64_t(17)}) {
    const Sample a = first.sample(i), b = again.sample(i);
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(a.labels, b.labels);
    EXPECT_EQ(a.sentence_order, b.sentence_order);
  }
  EXPECT_NE(first.sample(1).tokens, first.sample(2).tokens);
}

TEST(BertDatasetRefusals, DataWithoutSentenceSplittingNamesTheFix) {
  test_support::TempDir dir;
  auto data = std::make_shared<const IndexedDataset>(write_sentences(dir, 9, 20, true));
  try {
    BertDataset ds(data, Split::Train, {0, 20}, 10, config_in(dir, 32));
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--split-sentences"));
    EXPECT_THAT(e.what(), HasSubstr(data->prefix()));
  }
}

TEST(BertDatasetRefusals, ASequenceTooShortForTwoSegmentsIsRefused) {
  test_support::TempDir dir;
  auto data = std::make_shared<const IndexedDataset>(write_sentences(dir, 9, 20));
  EXPECT_THROW(BertDataset(data, Split::Train, {0, 20}, 10, config_in(dir, 4)), UserError);
}

}  // namespace
}  // namespace megatron::data
