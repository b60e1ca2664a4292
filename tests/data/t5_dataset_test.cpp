// T5Dataset over tiny sentence-split datasets: every sample and the sample index against an
// independent Python rewrite of Megatron-Core's T5 dataset (tests/data/reference_t5_samples.py),
// the span-corruption layout, purity and the refusals.
#include "data/t5_dataset.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "masked_test_data.hpp"
#include "support/temp_dir.hpp"

namespace megatron::data {
namespace {

using ::testing::HasSubstr;

// tiny_vocab's 40 tokens, then [BOS] 40, [EOS] 41 and sentinels 42.. as Megatron's tokenizer
// appends them.
constexpr int32_t kBos = 40, kEos = 41, kFirstSentinel = 42;

T5DatasetConfig config_in(const test_support::TempDir& dir, int64_t encoder, int64_t decoder,
                          int sentinels = 20) {
  auto continuation = std::make_shared<std::vector<bool>>();
  for (const auto& t : tiny_vocab()) continuation->push_back(t.rfind("##", 0) == 0);
  T5DatasetConfig config{.encoder_length = encoder,
                         .decoder_length = decoder,
                         .seed = 1234,
                         .short_seq_prob = 0.1,
                         .masking = {.mask_prob = 0.15, .max_ngram = 10, .full_word = true,
                                     .geometric = true, .bert_replacement = false, .cls = 2,
                                     .sep = 3, .mask = 4, .vocab_size = kFirstSentinel + sentinels},
                         .bos = kBos,
                         .eos = kEos,
                         .pad = 0,
                         .continuation = continuation,
                         .cache_dir = dir.path() / "cache"};
  for (int k = 0; k < sentinels; ++k) config.sentinels.push_back(kFirstSentinel + k);
  return config;
}

TEST(T5DatasetAgainstReference, SamplesAndIndexAreMegatrons) {
  if (!python_with_numpy()) GTEST_SKIP() << "NumPy is not installed for " << kPython;
  test_support::TempDir dir;
  const std::string prefix = write_sentences(dir, 3, 60);
  auto data = std::make_shared<const IndexedDataset>(prefix);
  const T5DatasetConfig config = config_in(dir, 48, 24);
  const T5Dataset ds(data, Split::Train, {2, 55}, 400, config);
  ASSERT_GE(ds.size(), 400);
  nlohmann::json dump{{"prefix", prefix}, {"vocab", tiny_vocab()}, {"cls", 2}, {"sep", 3},
                      {"mask", 4}, {"pad", 0}, {"bos", kBos}, {"eos", kEos},
                      {"sentinels", config.sentinels}, {"encoder_length", 48},
                      {"decoder_length", 24}, {"seed", 1234}, {"short_seq_prob", 0.1},
                      {"mask_prob", 0.15}, {"max_ngram", 10}, {"documents", {2, 55}},
                      {"max_samples", 400}};
  nlohmann::json index = nlohmann::json::array();
  nlohmann::json samples = nlohmann::json::array();
  for (int64_t i = 0; i < 150; ++i) {
    const Sample s = ds.sample(i);
    std::vector<int32_t> labels(s.labels.size(), -1);
    std::vector<int32_t> loss_mask(s.loss_mask.size());
    for (size_t t = 0; t < labels.size(); ++t) {
      if (s.loss_mask[t] > 0.0f) labels[t] = s.labels[t];
      loss_mask[t] = int32_t(s.loss_mask[t]);
    }
    samples.push_back({{"i", i}, {"text_enc", s.tokens}, {"text_dec", s.decoder_tokens},
                       {"labels", labels}, {"loss_mask", loss_mask}, {"enc_valid", s.valid_length}});
  }
  for (int64_t i = 0; i < ds.size(); ++i) index.push_back(ds.index_entry(i));
  dump["index"] = index;
  dump["samples"] = samples;
  std::ofstream(dir.path() / "dump.json") << dump.dump();
  const std::string command = std::string(kPython) + " " + MEGATRON_SOURCE_DIR +
                              "/tests/data/reference_t5_samples.py " +
                              (dir.path() / "dump.json").string() + " > " +
                              (dir.path() / "report.txt").string() + " 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream report(dir.path() / "report.txt");
  EXPECT_EQ(status, 0) << std::string(std::istreambuf_iterator<char>(report), {});
}

TEST(T5DatasetLayout, SpansBecomeSentinelsInTheEncoderAndReturnInTheDecoder) {
  test_support::TempDir dir;
  auto data = std::make_shared<const IndexedDataset>(write_sentences(dir, 5, 30));
  const T5Dataset ds(data, Split::Train, {0, 30}, 40, config_in(dir, 40, 20));
  int masked_samples = 0;
  for (int64_t i = 0; i < 40; ++i) {
    const Sample s = ds.sample(i);
    ASSERT_EQ(s.tokens.size(), 40u);
    ASSERT_EQ(s.decoder_tokens.size(), 20u);
    ASSERT_EQ(s.labels.size(), 20u);
    ASSERT_EQ(s.loss_mask.size(), 20u);
    EXPECT_EQ(s.decoder_tokens[0], kBos);
    // Labels are the decoder input shifted left by one, ending with [EOS].
    int64_t scored = 0;
    while (scored < 20 && s.loss_mask[size_t(scored)] > 0.0f) ++scored;
    ASSERT_GE(scored, 1);
    for (int64_t t = 0; t + 1 < scored; ++t) EXPECT_EQ(s.labels[size_t(t)], s.decoder_tokens[size_t(t + 1)]);
    EXPECT_EQ(s.labels[size_t(scored - 1)], kEos);
    for (int64_t t = scored; t < 20; ++t) {
      EXPECT_EQ(s.loss_mask[size_t(t)], 0.0f);
      EXPECT_EQ(s.decoder_tokens[size_t(t)], 0);
    }
    // The sentinels come in order, once each, in the encoder and in the decoder.
    std::vector<int32_t> in_encoder, in_decoder;
    for (int64_t t = 0; t < s.valid_length; ++t)
      if (s.tokens[size_t(t)] >= kFirstSentinel) in_encoder.push_back(s.tokens[size_t(t)]);
    for (int64_t t = 0; t < scored; ++t)
      if (s.decoder_tokens[size_t(t)] >= kFirstSentinel) in_decoder.push_back(s.decoder_tokens[size_t(t)]);
    EXPECT_EQ(in_encoder, in_decoder);
    for (size_t k = 0; k < in_encoder.size(); ++k) EXPECT_EQ(in_encoder[k], kFirstSentinel + int32_t(k));
    masked_samples += !in_encoder.empty();
    for (int64_t t = s.valid_length; t < 40; ++t) EXPECT_EQ(s.tokens[size_t(t)], 0);
  }
  EXPECT_GT(masked_samples, 30);
}

TEST(T5DatasetPurity, ASampleIsTheSameWheneverItIsDrawn) {
  test_support::TempDir dir;
  auto data = std::make_shared<const IndexedDataset>(write_sentences(dir, 7, 30));
  const T5Dataset a(data, Split::Train, {0, 30}, 50, config_in(dir, 32, 16));
  const Sample late = a.sample(17);
  for (int64_t i = 0; i < 17; ++i) a.sample(i);
  const T5Dataset b(data, Split::Train, {0, 30}, 50, config_in(dir, 32, 16));
  const Sample again = b.sample(17);
  EXPECT_EQ(late.tokens, again.tokens);
  EXPECT_EQ(late.decoder_tokens, again.decoder_tokens);
  EXPECT_EQ(late.labels, again.labels);
}

TEST(T5DatasetRefusals, TooFewSentinelsForASampleNameTheSetting) {
  test_support::TempDir dir;
  auto data = std::make_shared<const IndexedDataset>(write_sentences(dir, 5, 30));
  const T5Dataset ds(data, Split::Train, {0, 30}, 40, config_in(dir, 64, 40, 1));
  try {
    for (int64_t i = 0; i < ds.size(); ++i) ds.sample(i);
    FAIL() << "no sample needed a second sentinel";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("data.vocab_extra_ids"));
  }
}

TEST(T5DatasetRefusals, ADecoderTooShortForTheSpansNamesTheSetting) {
  test_support::TempDir dir;
  auto data = std::make_shared<const IndexedDataset>(write_sentences(dir, 5, 30));
  const T5Dataset ds(data, Split::Train, {0, 30}, 40, config_in(dir, 64, 3));
  try {
    for (int64_t i = 0; i < ds.size(); ++i) ds.sample(i);
    FAIL() << "every sample fit 3 decoder positions";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("data.decoder_seq_length"));
  }
}

TEST(T5DatasetRefusals, AnEncoderTooShortIsRefusedNamingTheSetting) {
  test_support::TempDir dir;
  auto data = std::make_shared<const IndexedDataset>(write_sentences(dir, 5, 10));
  try {
    T5Dataset(data, Split::Train, {0, 10}, 10, config_in(dir, 3, 8));
    FAIL() << "an encoder of 3 tokens was accepted";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("(data.seq_length)"));
  }
}

TEST(T5DatasetRefusals, DocumentsOutsideTheDatasetAreRefused) {
  test_support::TempDir dir;
  auto data = std::make_shared<const IndexedDataset>(write_sentences(dir, 5, 10));
  EXPECT_THROW(T5Dataset(data, Split::Train, {-1, 5}, 10, config_in(dir, 32, 16)), UserError);
  EXPECT_THROW(T5Dataset(data, Split::Train, {4, 11}, 10, config_in(dir, 32, 16)), UserError);
}

}  // namespace
}  // namespace megatron::data
