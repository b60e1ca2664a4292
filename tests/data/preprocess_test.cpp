// `megatron preprocess` end to end on small JSONL files: exact bytes, order, errors, inputs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "data/indexed_dataset.hpp"
#include "data/preprocess.hpp"
#include "data/word_tokenizer.hpp"
#include "data/worker_limit.hpp"
#include "support/bytes.hpp"
#include "support/temp_dir.hpp"

namespace megatron::data {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using test_support::little_endian;
using test_support::slurp;

class Preprocess : public ::testing::Test {
 protected:
  PreprocessSummary run(const std::string& jsonl, PreprocessOptions options = {},
                        const std::string& name = "corpus.jsonl") {
    options.input = dir_.write(name, jsonl).string();
    if (options.output_prefix.empty()) options.output_prefix = (dir_.path() / "out").string();
    return preprocess(options, tokenizer_, {});
  }
  std::string error_of(const std::string& jsonl, PreprocessOptions options = {}) {
    try {
      run(jsonl, std::move(options));
    } catch (const UserError& e) {
      return e.what();
    }
    return "";
  }
  std::string out(const std::string& suffix) const { return (dir_.path() / "out").string() + suffix; }

  test_support::TempDir dir_;
  WordTokenizer tokenizer_;
};

const char* kCorpus =
    "{\"text\": \"w5 w6 w7\", \"id\": 1}\n"
    "{\"text\": \"w8\"}\n"
    "{\"text\": \"\"}\n"
    "{\"text\": [\"w9 w10\", \"w11\"]}\n";

TEST_F(Preprocess, WritesMegatronsIdxAndBinByteForByte) {
  PreprocessOptions options;
  options.append_eod = true;
  const auto s = run(kCorpus, options);
  EXPECT_EQ(s.documents, 4);
  // Sequences: [5 6 7 eod] [8 eod] (the empty document has none) [9 10] [11 eod].
  EXPECT_EQ(slurp(out("_text_document.bin")), little_endian<uint16_t>({5, 6, 7, 0, 8, 0, 9, 10, 11, 0}));
  const std::string idx = std::string("MMIDIDX\0\0", 9) + little_endian<uint64_t>({1}) + std::string(1, '\x08') +
                          little_endian<uint64_t>({4}) + little_endian<uint64_t>({5}) + little_endian<int32_t>({4, 2, 2, 2}) +
                          little_endian<int64_t>({0, 8, 12, 16}) + little_endian<int64_t>({0, 1, 2, 2, 4});
  EXPECT_EQ(slurp(out("_text_document.idx")), idx);
}

TEST_F(Preprocess, WithoutAppendEodDocumentsCarryOnlyTheirTokens) {
  run(kCorpus);
  const IndexedDataset ds(out("_text_document"));
  EXPECT_THAT(ds.tokens(0), ElementsAre(5, 6, 7));
  EXPECT_EQ(ds.total_tokens(), 7);
}

TEST_F(Preprocess, EachJsonKeyGetsItsOwnDataset) {
  PreprocessOptions options;
  options.json_keys = {"text", "title"};
  run("{\"text\": \"w1 w2\", \"title\": \"w3\"}\n", options);
  EXPECT_THAT(IndexedDataset(out("_text_document")).tokens(0), ElementsAre(1, 2));
  EXPECT_THAT(IndexedDataset(out("_title_document")).tokens(0), ElementsAre(3));
}

TEST_F(Preprocess, OutputIsTheSameWhateverTheNumberOfWorkers) {
  std::string corpus;
  for (int i = 0; i < 2000; ++i) corpus += "{\"text\": \"w" + std::to_string(i % 900) + " w" + std::to_string(i) + "\"}\n";
  PreprocessOptions one;
  one.batch_bytes = 256;  // many small batches, so workers really interleave
  one.output_prefix = (dir_.path() / "one").string();
  run(corpus, one);
  PreprocessOptions four = one;
  four.workers = 4;
  four.output_prefix = (dir_.path() / "four").string();
  run(corpus, four);
  EXPECT_EQ(slurp(one.output_prefix + "_text_document.bin"), slurp(four.output_prefix + "_text_document.bin"));
  EXPECT_EQ(slurp(one.output_prefix + "_text_document.idx"), slurp(four.output_prefix + "_text_document.idx"));
  EXPECT_EQ(IndexedDataset(four.output_prefix + "_text_document").documents(), 2000);
}

TEST_F(Preprocess, ALineThatIsNotJsonStopsWithItsFileAndLine) {
  const std::string e = error_of("{\"text\": \"w1\"}\nnot json\n");
  EXPECT_THAT(e, HasSubstr("corpus.jsonl:2: not a JSON object; fix the line or pass --skip-bad-lines"));
  EXPECT_FALSE(std::filesystem::exists(out("_text_document.bin")));
  EXPECT_FALSE(std::filesystem::exists(out("_text_document.idx")));
}

TEST_F(Preprocess, AMissingKeyNamesTheKeysThatWereFound) {
  EXPECT_THAT(error_of("{\"text\": \"w1\"}\n{\"body\": \"w2\", \"id\": 3}\n"),
              HasSubstr("corpus.jsonl:2: no key 'text' (keys: body, id)"));
}

TEST_F(Preprocess, ANonStringValueIsABadLine) {
  EXPECT_THAT(error_of("{\"text\": 42}\n"), HasSubstr("corpus.jsonl:1: key 'text' is not a string"));
}

TEST_F(Preprocess, SkipBadLinesCountsThemAndKeepsTheRest) {
  PreprocessOptions options;
  options.skip_bad_lines = true;
  const auto s = run("{\"text\": \"w1\"}\ngarbage\n{\"other\": 1}\n{\"text\": \"w2\"}\n", options);
  EXPECT_EQ(s.documents, 2);
  EXPECT_EQ(s.skipped, 2);
  EXPECT_EQ(IndexedDataset(out("_text_document")).documents(), 2);
}

TEST_F(Preprocess, AFailureLeavesAnExistingDatasetUnderTheSameNameIntact) {
  run("{\"text\": \"w7\"}\n");
  const std::string before = slurp(out("_text_document.bin")) + slurp(out("_text_document.idx"));
  EXPECT_NE(error_of("{\"text\": \"w1\"}\n{bad\n"), "");
  EXPECT_EQ(slurp(out("_text_document.bin")) + slurp(out("_text_document.idx")), before);
  std::size_t files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir_.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 3u);  // the corpus and the two dataset files: no temporary leftovers
}

TEST_F(Preprocess, MissingInputIsNamedAndWritesNothing) {
  PreprocessOptions options;
  options.input = (dir_.path() / "nope.jsonl").string();
  options.output_prefix = (dir_.path() / "out").string();
  try {
    preprocess(options, tokenizer_, {});
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("nope.jsonl' does not exist"));
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir_.path()));
}

TEST_F(Preprocess, GzipAndZstdInputsGiveTheSameDataset) {
  std::string corpus;
  for (int i = 0; i < 500; ++i) corpus += "{\"text\": \"w" + std::to_string(i) + " w3\"}\n";
  run(corpus);
  const std::string plain = slurp(out("_text_document.bin")) + slurp(out("_text_document.idx"));

  const auto gz = dir_.path() / "c.jsonl.gz";
  gzFile f = gzopen(gz.c_str(), "wb");
  gzwrite(f, corpus.data(), static_cast<unsigned>(corpus.size()));
  gzclose(f);
  PreprocessOptions options;
  options.input = gz.string();
  options.output_prefix = (dir_.path() / "gz").string();
  preprocess(options, tokenizer_, {});
  EXPECT_EQ(slurp(options.output_prefix + "_text_document.bin") +
                slurp(options.output_prefix + "_text_document.idx"),
            plain);

  std::string compressed(ZSTD_compressBound(corpus.size()), '\0');
  compressed.resize(ZSTD_compress(compressed.data(), compressed.size(), corpus.data(), corpus.size(), 3));
  options.input = dir_.write("c.jsonl.zst", compressed).string();
  options.output_prefix = (dir_.path() / "zst").string();
  preprocess(options, tokenizer_, {});
  EXPECT_EQ(slurp(options.output_prefix + "_text_document.bin") +
                slurp(options.output_prefix + "_text_document.idx"),
            plain);
}

TEST_F(Preprocess, ADuplicateJsonKeyKeepsTheLastValueAsPythonDoes) {
  run("{\"text\": \"w1\", \"id\": 1, \"text\": \"w2 w3\"}\n");
  EXPECT_THAT(IndexedDataset(out("_text_document")).tokens(0), ElementsAre(2, 3));
}

TEST_F(Preprocess, KeysFromTheCorpusAreEscapedInTheError) {
  EXPECT_THAT(error_of("{\"a\\u0001b\": \"w1\"}\n"), HasSubstr("no key 'text' (keys: a\\x01b)"));
}

TEST_F(Preprocess, MoreWorkersThanTheMachineCanRunAreRefusedBeforeAnythingIsWritten) {
  PreprocessOptions options;
  options.workers = max_workers() + 1;
  EXPECT_THAT(error_of("{\"text\": \"w1\"}\n", options),
              AllOf(HasSubstr(fmt::format("--workers {}: more threads than this machine", max_workers() + 1)),
                    HasSubstr(fmt::format("use --workers {} or fewer", max_workers()))));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_.path()), {}), 1);  // the corpus
}

TEST_F(Preprocess, ATruncatedGzipCorpusIsAnErrorAndWritesNothing) {
  std::string corpus;
  for (int i = 0; i < 100; ++i) corpus += "{\"text\": \"w" + std::to_string(i) + "\"}\n";
  const auto gz = dir_.path() / "c.jsonl.gz";
  gzFile f = gzopen(gz.c_str(), "wb");
  gzwrite(f, corpus.data(), static_cast<unsigned>(corpus.size()));
  gzclose(f);
  std::filesystem::resize_file(gz, std::filesystem::file_size(gz) - 4);
  PreprocessOptions options;
  options.input = gz.string();
  options.output_prefix = (dir_.path() / "out").string();
  try {
    preprocess(options, tokenizer_, {});
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("c.jsonl.gz' is truncated or corrupt"));
  }
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_.path()), {}), 1);
}

TEST_F(Preprocess, WindowsLineEndingsAndAMissingFinalNewlineAreFine) {
  run("{\"text\": \"w1\"}\r\n{\"text\": \"w2\"}");
  const IndexedDataset ds(out("_text_document"));
  EXPECT_EQ(ds.documents(), 2);
  EXPECT_THAT(ds.tokens(1), ElementsAre(2));
}

}  // namespace
}  // namespace megatron::data

namespace megatron::data {
namespace {

TEST_F(Preprocess, SplitSentencesWritesOneSequencePerSentence) {
  PreprocessOptions options;
  options.split_sentences = true;
  options.append_eod = true;
  const auto s = run("{\"text\": \"w5 w6. Ok w7! Ok w8\"}\n", options);
  ASSERT_EQ(s.outputs.size(), 1u);
  EXPECT_EQ(s.outputs[0], out("_text_sentence"));
  const IndexedDataset ds(out("_text_sentence"));
  EXPECT_EQ(ds.documents(), 1);
  // "w5 w6." / "Ok w7!" / "Ok w8" + eod ("Ok" is token 1).
  EXPECT_THAT(ds.sequence_lengths(), ElementsAre(2, 2, 3));
  EXPECT_THAT(ds.tokens(2), ElementsAre(1, 8, 0));
}

}  // namespace
}  // namespace megatron::data
