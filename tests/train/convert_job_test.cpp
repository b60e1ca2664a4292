// train::convert (`megatron convert`) on tiny checkpoints and Hugging Face directories written
// here: what it refuses before writing and what it warns about.
#include "train/convert_job.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <sstream>

#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/directory.hpp"
#include "ckpt/hf_fixtures.hpp"
#include "ckpt/hugging_face.hpp"
#include "ckpt/rewrite.hpp"
#include "support/temp_dir.hpp"
#include "support/user_error.hpp"

namespace megatron::train {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using test_support::user_error_of;

// A save directory `dir` holding the tiny GPT-2 at `iteration` (latest names it).
void write_checkpoint(const fs::path& dir, int64_t iteration) {
  const model::ModelConfig c = test_support::hf_tiny_gpt2();
  ckpt::CheckpointMeta meta = test_support::hf_meta(c, tensor::DType::F32);
  meta.state.iteration = iteration;
  ckpt::rewrite_checkpoint(test_support::MemorySource(c, tensor::DType::F32), meta, {}, dir);
}

// The tiny GPT-2 (vocabulary 50) as a Hugging Face directory dir/hf.
fs::path write_hf_model(const fs::path& dir) {
  write_checkpoint(dir / "ckpt", 1);
  ckpt::export_hugging_face(ckpt::CheckpointReader(dir / "ckpt" / "iter_0000001"),
                            test_support::hf_tiny_gpt2(), dir / "hf", std::nullopt);
  return dir / "hf";
}

// What `f` logs at warning level and above.
std::string warnings_of(const std::function<void()>& f) {
  std::ostringstream text;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(text);
  sink->set_level(spdlog::level::warn);
  auto& sinks = spdlog::default_logger()->sinks();
  sinks.push_back(sink);
  f();
  sinks.pop_back();
  return text.str();
}

TEST(Convert, RepointingLatestToAnOlderIterationWarnsNamingBoth) {
  test_support::TempDir dir;
  write_checkpoint(dir.path() / "save", 5);
  write_checkpoint(dir.path() / "old", 2);
  const std::string warned = warnings_of([&] {
    convert({.load = (dir.path() / "old").string(), .save = (dir.path() / "save").string(),
             .quiet = true});
  });
  EXPECT_THAT(warned, HasSubstr("latest named iter_0000005 and now names iter_0000002, an older "
                                "iteration"));
  EXPECT_EQ(ckpt::latest_iteration(dir.path() / "save"), 2);
}

TEST(Convert, ANewerIterationMovesLatestWithoutAWarning) {
  test_support::TempDir dir;
  write_checkpoint(dir.path() / "save", 2);
  write_checkpoint(dir.path() / "new", 5);
  const std::string warned = warnings_of([&] {
    convert({.load = (dir.path() / "new").string(), .save = (dir.path() / "save").string(),
             .quiet = true});
  });
  EXPECT_EQ(warned, "");
  EXPECT_EQ(ckpt::latest_iteration(dir.path() / "save"), 5);
}

TEST(Convert, HfImportRefusesAVocabJsonThatIsNotJsonNamingIt) {
  test_support::TempDir dir;
  const fs::path hf = write_hf_model(dir.path());
  const fs::path vocab = dir.write("hf/vocab.json", "{\"a\": 0,");
  dir.write("hf/merges.txt", "#version: 0.2\n");
  const std::string e = user_error_of([&] {
    convert({.load = hf.string(), .save = (dir.path() / "out").string(), .from = "hf", .quiet = true});
  });
  EXPECT_THAT(e, HasSubstr("'" + vocab.string() + "' is not valid JSON"));
  EXPECT_THAT(e, HasSubstr("the tokenizer of the model being imported"));
  EXPECT_FALSE(fs::exists(dir.path() / "out"));
}

TEST(Convert, HfImportRefusesAVocabJsonThatIsNotAnObjectOfIds) {
  test_support::TempDir dir;
  const fs::path hf = write_hf_model(dir.path());
  dir.write("hf/merges.txt", "#version: 0.2\n");
  for (const char* text : {"[\"a\", \"b\"]", "{\"a\": 0, \"b\": 7}", "{\"a\": \"zero\"}"}) {
    const fs::path vocab = dir.write("hf/vocab.json", text);
    EXPECT_THAT(user_error_of([&] {
                  convert({.load = hf.string(), .save = (dir.path() / "out").string(),
                           .from = "hf", .quiet = true});
                }),
                HasSubstr("'" + vocab.string() + "'"))
        << text;
  }
}

TEST(Convert, HfImportRefusesATokenizerWithIdsPastTheModelsVocabulary) {
  test_support::TempDir dir;
  const fs::path hf = write_hf_model(dir.path());
  const fs::path gpt2 = fs::path(MEGATRON_SOURCE_DIR) / "data" / "tokenizers" / "gpt2";
  fs::copy_file(gpt2 / "vocab.json", hf / "vocab.json");
  fs::copy_file(gpt2 / "merges.txt", hf / "merges.txt");
  EXPECT_EQ(user_error_of([&] {
              convert({.load = hf.string(), .save = (dir.path() / "out").string(), .from = "hf",
                       .quiet = true});
            }),
            (hf / "vocab.json").string() +
                ": the tokenizer has 50257 tokens (ids 0..50256) but the model's vocabulary "
                "(config.json vocab_size) 50: ids past it have no embedding row; it is another "
                "model's tokenizer");
}

}  // namespace
}  // namespace megatron::train
