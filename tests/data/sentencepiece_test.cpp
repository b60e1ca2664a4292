// SentencePiece through libsentencepiece: a model trained here on a bundled corpus loads,
// round-trips text and names its special tokens.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sentencepiece_trainer.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "data/sentencepiece.hpp"
#include "data/tokenizer.hpp"
#include "support/temp_dir.hpp"

namespace megatron::data {
namespace {

using ::testing::HasSubstr;

// Trains a 500-piece unigram model on the first chapters of Austen (no network, ~1 s).
class SentencePiece : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test_support::TempDir;
    std::ifstream corpus(std::string(MEGATRON_SOURCE_DIR) + "/data/corpora/austen.jsonl");
    std::ofstream text(dir_->path() / "text.txt");
    std::string line;
    for (int i = 0; i < 8 && std::getline(corpus, line); ++i)
      text << nlohmann::json::parse(line)["text"].get<std::string>() << "\n";
    text.close();
    const auto status = sentencepiece::SentencePieceTrainer::Train(
        "--input=" + (dir_->path() / "text.txt").string() + " --model_prefix=" +
        (dir_->path() / "sp").string() +
        " --vocab_size=500 --model_type=unigram --minloglevel=2 --pad_id=3");
    ASSERT_TRUE(status.ok()) << status.ToString();
    model_ = (dir_->path() / "sp.model").string();
  }
  static void TearDownTestSuite() { delete dir_; }

  static test_support::TempDir* dir_;
  static std::string model_;
};
test_support::TempDir* SentencePiece::dir_ = nullptr;
std::string SentencePiece::model_;

TEST_F(SentencePiece, EncodesAndDecodesBackToTheText) {
  const auto tok = load_sentencepiece(model_);
  const std::string text = "Emma Woodhouse, handsome, clever, and rich.";
  const auto ids = tok->encode(text);
  EXPECT_GT(ids.size(), 5u);
  EXPECT_EQ(tok->decode(ids), text);
  EXPECT_EQ(tok->vocab_size(), 500);
}

TEST_F(SentencePiece, NamesItsSpecialTokens) {
  const auto tok = load_sentencepiece(model_);
  EXPECT_EQ(tok->special_tokens().unk, 0);
  EXPECT_EQ(tok->special_tokens().cls, 1);  // <s>
  EXPECT_EQ(tok->special_tokens().eod, 2);  // </s>
  EXPECT_EQ(tok->special_tokens().pad, 3);
  EXPECT_EQ(tok->token_text(2), "</s>");
}

TEST_F(SentencePiece, TheFactoryBuildsItFromTheRecipeName) {
  TokenizerFiles files;
  files.tokenizer_model = model_;
  EXPECT_EQ(make_tokenizer(data::TokenizerKind::SentencePiece, files)->vocab_size(), 500);
  files.tokenizer_model.clear();
  try {
    make_tokenizer(data::TokenizerKind::SentencePiece, files);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("the sentencepiece tokenizer needs a tokenizer model"));
  }
}

TEST(SentencePieceFiles, AFileThatIsNotAModelIsRejected) {
  test_support::TempDir dir;
  const auto bogus = dir.write("bogus.model", "not a model");
  try {
    load_sentencepiece(bogus.string());
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("is not a SentencePiece model"));
  }
  EXPECT_THROW(load_sentencepiece((dir.path() / "missing.model").string()), UserError);
}

}  // namespace
}  // namespace megatron::data
